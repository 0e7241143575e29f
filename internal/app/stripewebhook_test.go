package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/payment"
	"chargeonce/provider/providertest"
	"chargeonce/provider/stripe"
	"chargeonce/provider/stripe/stripefake"
)

// 3-D Secure through Stripe over the real server: a charge with a
// returnUrl, the fake Stripe's challenge page, and how its end is found: a
// signed webhook event (read at once), a retry of the key or the
// reconciler (no webhook), or the reconciler's cancel after the window.

const testStripeWebhookSecret = "whsec_chargeonce_test_0000000000"

// shopperReturnURL is where the test checkout wants its shopper back.
const shopperReturnURL = "http://127.0.0.1:5173/return"

type stripeAuth struct {
	s    *testServer
	fake *stripefake.Server
	pool *pgxpool.Pool
}

// stripeAuthServer is a server charging through a fake Stripe, its webhook
// endpoint signed with testStripeWebhookSecret, and a reconciler that does
// not look at a waiting attempt within a test unless env says so: what
// ends a wait is what the test does.
func stripeAuthServer(t *testing.T, env map[string]string) stripeAuth {
	t.Helper()
	dbURL := dbtest.NewDatabase(t)
	fake := stripefake.Start(t)
	vars := fake.Env(map[string]string{"STRIPE_WEBHOOK_SECRET": testStripeWebhookSecret, "AUTHENTICATION_CHECK_INTERVAL": "1h"}, env)
	return stripeAuth{s: startServer(t, dbURL, vars), fake: fake, pool: dbtest.Open(t, dbURL)}
}

// chargeWaiting charges a card that needs 3-D Secure with a returnUrl under
// key; the attempt must wait for the shopper at one PaymentIntent.
func (a stripeAuth) chargeWaiting(t *testing.T, key string) (*apiclient.ChargeResult, stripefake.Intent) {
	t.Helper()
	in := withPaymentMethod("pm_card_authenticationRequired")
	in.ReturnUrl = new(shopperReturnURL)
	r := a.s.chargeCard(t, "demo-key", key, in)
	require.Empty(t, r.Errors)
	waiting := r.Data.ChargeCard
	require.Equal(t, "PROCESSING", waiting.Status)
	require.NotNil(t, waiting.NextAction, "the shopper must authenticate")
	intents := a.fake.ClientIntents(key)
	require.Len(t, intents, 1)
	return waiting, intents[0]
}

// stored is the status and failure code the database holds for key: what
// the attempt is, read without asking chargeonce (which may read Stripe).
func (a stripeAuth) stored(t require.TestingT, key string) (status, failureCode string) {
	helper(t)
	require.NoError(t, a.pool.QueryRow(context.Background(),
		"SELECT status::text, coalesce(failure_code, '') FROM charge_attempts WHERE idempotency_key = $1", key).Scan(&status, &failureCode))
	return status, failureCode
}

// eventually waits for the stored attempt of key to be status with code.
func (a stripeAuth) eventually(t *testing.T, key, status, code string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, gotCode := a.stored(c, key)
		require.Equal(c, status, got)
		require.Equal(c, code, gotCode)
	}, 15*time.Second, 50*time.Millisecond)
}

// deliver posts a Stripe event to the webhook endpoint, signed now with
// secret ("" for no signature), and returns the status.
func (a stripeAuth) deliver(t *testing.T, payload []byte, secret string) int {
	t.Helper()
	require.NotNil(t, payload)
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	if secret != "" {
		h.Set("Stripe-Signature", stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
			Payload: payload, Secret: secret, Timestamp: time.Now()}).Header)
	}
	return a.s.send(t, http.MethodPost, StripeWebhookPath, h, bytes.NewReader(payload)).status
}

// reads counts the API requests the fake Stripe has received.
func (a stripeAuth) reads() int { return len(a.fake.Calls()) }

func (a stripeAuth) events(t *testing.T, key, typ string) int {
	t.Helper()
	return countRows(t, a.pool, `SELECT count(*)::int FROM charge_events WHERE idempotency_key = $1 AND type = $2`, key, typ)
}

func TestStripe_Authentication_RedirectToTheChallengeAndBack_RetryOfTheKeyFindsItSucceeded(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, map[string]string{"STRIPE_WEBHOOK_SECRET": ""}) // no webhook: polls only
	key := newKey()
	waiting, pi := a.chargeWaiting(t, key)
	require.Equal(t, apiclient.NextActionTypeRedirect, waiting.NextAction.Type)
	require.Equal(t, pi.NextActionURL, waiting.NextAction.Url, "nextAction is the PaymentIntent's next_action.redirect_to_url.url")
	require.True(t, strings.HasPrefix(waiting.NextAction.Url, a.fake.URL+"/redirect/authenticate/"+pi.ID), waiting.NextAction.Url)
	require.Equal(t, "requires_action", pi.Status)
	creates := 0
	for _, c := range a.fake.Calls() {
		if c.Method == http.MethodPost && c.Path == "/v1/payment_intents" {
			creates++
			require.Equal(t, shopperReturnURL+"?"+payment.ReturnKeyParam+"="+key, c.Form.Get("return_url"))
		}
	}
	require.Equal(t, 1, creates)
	require.Equal(t, 1, a.events(t, key, "charge.requires_action"))

	// The shopper authenticates on the challenge page, which sends them back.
	back := providertest.PressChallenge(t, nil, waiting.NextAction.Url, "complete")
	require.Equal(t, "127.0.0.1:5173", back.Host)
	require.Equal(t, key, back.Query().Get(payment.ReturnKeyParam), "the page back can resume the attempt")

	// The page back retries the key: it reads Stripe (at most once a second).
	in := withPaymentMethod("pm_card_authenticationRequired")
	in.ReturnUrl = new(shopperReturnURL)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		done := a.s.chargeCard(c, "demo-key", key, in)
		require.Empty(c, done.Errors)
		require.Equal(c, "SUCCEEDED", done.Data.ChargeCard.Status)
		require.Nil(c, done.Data.ChargeCard.NextAction)
		require.Equal(c, pi.ID, done.Data.ChargeCard.Charge.ProviderChargeId)
	}, 10*time.Second, 100*time.Millisecond)
	require.Len(t, a.fake.CreateKeys(), 1, "a waiting attempt is never sent again")
	require.Len(t, a.fake.ClientIntents(key), 1, "one PaymentIntent")
	require.Equal(t, 1, a.events(t, key, "charge.succeeded"))
}

func TestStripe_Authentication_CompletedWithoutWebhook_TheReconcilerFindsIt(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, map[string]string{"STRIPE_WEBHOOK_SECRET": "",
		"AUTHENTICATION_CHECK_INTERVAL": "200ms", "RECONCILE_INTERVAL": "100ms"})
	key := newKey()
	_, pi := a.chargeWaiting(t, key)
	time.Sleep(500 * time.Millisecond) // the reconciler has looked, and left it waiting
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status)

	require.NoError(t, a.fake.CompleteAuthentication(pi.ID))
	a.eventually(t, key, "SUCCEEDED", "") // nobody asks chargeonce: only the reconciler reads
	require.Len(t, a.fake.CreateKeys(), 1)
	require.Equal(t, 1, a.events(t, key, "charge.succeeded"))
}

func TestStripe_Webhook_Succeeded_TheAttemptIsSucceededAtOnce(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	key := newKey()
	_, pi := a.chargeWaiting(t, key)
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID))
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status, "chargeonce has not read Stripe since")

	before := a.reads()
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.succeeded", pi.ID), testStripeWebhookSecret))
	status, _ = a.stored(t, key)
	require.Equal(t, "SUCCEEDED", status, "recorded before the endpoint answered")
	require.Greater(t, a.reads(), before, "chargeonce read the PaymentIntent from Stripe: the event decides nothing")

	final := a.s.chargeStatus(t, "demo-key", key).Data.ChargeStatus
	require.Equal(t, "SUCCEEDED", final.Status)
	require.Equal(t, pi.ID, final.Charge.ProviderChargeId)
	require.Len(t, a.fake.ClientIntents(key), 1, "one charge")
	require.Equal(t, 1, a.events(t, key, "charge.succeeded"))
	require.Contains(t, a.s.logText(), "stripe_event_type=payment_intent.succeeded")
	require.NotContains(t, a.s.logText(), testStripeWebhookSecret)
}

func TestStripe_Webhook_ForgedSignature_RefusedAndNothingRead(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	key := newKey()
	_, pi := a.chargeWaiting(t, key)
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID)) // a read now would finalize it
	payload := a.fake.Event("payment_intent.succeeded", pi.ID)

	before := a.reads()
	require.Equal(t, http.StatusBadRequest, a.deliver(t, payload, "whsec_forged_0000000000"))
	require.Equal(t, http.StatusBadRequest, a.deliver(t, payload, ""), "unsigned")
	require.Equal(t, http.StatusBadRequest, a.s.send(t, http.MethodPost, StripeWebhookPath,
		http.Header{"Stripe-Signature": {"t=1,v1=00"}}, bytes.NewReader(payload)).status, "signed long ago, by nobody")
	require.Equal(t, before, a.reads(), "nothing read from Stripe")
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status, "the attempt unchanged")
	require.Contains(t, a.s.logText(), "refused a Stripe webhook request")
}

func TestStripe_Webhook_RedeliveredAndOutOfOrder_ChangeNothing(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	key := newKey()
	_, pi := a.chargeWaiting(t, key)
	stale := a.fake.Event("payment_intent.requires_action", pi.ID) // rendered while it waited
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID))
	succeeded := a.fake.Event("payment_intent.succeeded", pi.ID)

	require.Equal(t, http.StatusOK, a.deliver(t, succeeded, testStripeWebhookSecret))
	require.Equal(t, http.StatusOK, a.deliver(t, succeeded, testStripeWebhookSecret), "redelivered")
	require.Equal(t, http.StatusOK, a.deliver(t, stale, testStripeWebhookSecret), "late, after the success")
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.canceled", pi.ID), testStripeWebhookSecret),
		"an event that disagrees with Stripe: Stripe is asked, not the event")
	status, _ := a.stored(t, key)
	require.Equal(t, "SUCCEEDED", status)
	require.Equal(t, 1, a.events(t, key, "charge.succeeded"), "recorded once")
	require.Len(t, a.fake.ClientIntents(key), 1)

	// Verified events chargeonce has nothing to do with: 200, so that Stripe
	// stops sending them.
	for name, object := range map[string]map[string]any{
		"an attempt chargeonce does not know": {"id": "pi_other", "object": "payment_intent", "metadata": map[string]string{stripe.MetadataAttemptID: uuid.NewString()}},
		"a PaymentIntent of no attempt":       {"id": "pi_other", "object": "payment_intent", "metadata": map[string]string{}},
	} {
		raw, err := json.Marshal(map[string]any{"id": "evt_other", "object": "event", "type": "payment_intent.succeeded",
			"api_version": stripefake.EventAPIVersion, "data": map[string]any{"object": object}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, a.deliver(t, raw, testStripeWebhookSecret), name)
	}
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.created", pi.ID), testStripeWebhookSecret), "a type it ignores")
}

func TestStripe_Authentication_Failed_FoundByWebhook_AuthenticationFailed(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	key := newKey()
	waiting, pi := a.chargeWaiting(t, key)
	providertest.PressChallenge(t, nil, waiting.NextAction.Url, "fail")

	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.payment_failed", pi.ID), testStripeWebhookSecret))
	status, code := a.stored(t, key)
	require.Equal(t, "FAILED", status)
	require.Equal(t, payment.FailureAuthenticationFailed, code)
	failed := a.s.chargeStatus(t, "demo-key", key).Data.ChargeStatus
	require.Equal(t, payment.FailureAuthenticationFailed, failed.Failure.Code)
	require.Equal(t, "The card's authentication (3-D Secure) failed. The card was not charged.", failed.Failure.Message)
	require.Nil(t, failed.NextAction)
	require.Equal(t, "requires_payment_method", a.fake.ClientIntents(key)[0].Status)
}

func TestStripe_Authentication_Abandoned_CancelledAtStripe_AuthenticationAbandoned(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, map[string]string{"AUTHENTICATION_WINDOW": "1s",
		"AUTHENTICATION_CHECK_INTERVAL": "200ms", "RECONCILE_INTERVAL": "100ms"})
	key := newKey()
	_, pi := a.chargeWaiting(t, key)
	a.eventually(t, key, "FAILED", payment.FailureAuthenticationAbandoned)
	cancelled := a.fake.ClientIntents(key)[0]
	require.Equal(t, "canceled", cancelled.Status, "the PaymentIntent can never be completed now")
	require.Equal(t, "abandoned", cancelled.CancellationReason)

	// Stripe's event of the cancel: nothing left to do.
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.canceled", pi.ID), testStripeWebhookSecret))
	r := a.s.chargeStatus(t, "demo-key", key).Data.ChargeStatus
	require.Equal(t, "FAILED", r.Status)
	require.Equal(t, payment.FailureAuthenticationAbandoned, r.Failure.Code)
	require.Equal(t, 1, a.events(t, key, "charge.failed"))
}

func TestStripe_Authentication_CancelRefusedBecauseSucceeded_Succeeded(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, map[string]string{"AUTHENTICATION_WINDOW": "1s",
		"AUTHENTICATION_CHECK_INTERVAL": "200ms", "RECONCILE_INTERVAL": "100ms"})
	// The shopper comes back from the bank just as the window ends: the
	// payment completes just before the reconciler's cancel reaches Stripe.
	a.fake.Script(func(c stripefake.Call) stripefake.Fault {
		if strings.HasSuffix(c.Path, "/cancel") {
			return stripefake.CompletesFirst
		}
		return stripefake.None
	})
	key := newKey()
	_, pi := a.chargeWaiting(t, key)
	a.eventually(t, key, "SUCCEEDED", "")
	var cancels []stripefake.Call
	for _, c := range a.fake.Calls() {
		if strings.HasSuffix(c.Path, "/cancel") {
			cancels = append(cancels, c)
		}
	}
	require.NotEmpty(t, cancels, "the reconciler did try to cancel")
	require.Equal(t, http.StatusBadRequest, cancels[0].Status, "Stripe refused: the PaymentIntent had succeeded")
	require.Equal(t, "succeeded", a.fake.ClientIntents(key)[0].Status)
	r := a.s.chargeStatus(t, "demo-key", key).Data.ChargeStatus
	require.Equal(t, pi.ID, r.Charge.ProviderChargeId)
}

func TestStripe_Authentication_WithoutReturnURL_AuthenticationRequired(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	key := newKey()
	r := a.s.chargeCard(t, "demo-key", key, withPaymentMethod("pm_card_authenticationRequired")).Data.ChargeCard
	require.Equal(t, "FAILED", r.Status)
	require.Equal(t, payment.FailureAuthenticationRequired, r.Failure.Code)
	require.Nil(t, r.NextAction)
	pi := a.fake.ClientIntents(key)[0]
	require.Equal(t, "canceled", pi.Status, "cancelled at Stripe, so it can never be completed later")
	require.Empty(t, a.fake.Calls()[0].Form.Get("return_url"))
}

func TestStripe_Webhook_WithoutSecret_503AndSaidAtStart(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, map[string]string{"STRIPE_WEBHOOK_SECRET": ""})
	key := newKey()
	_, pi := a.chargeWaiting(t, key)
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID))
	payload := a.fake.Event("payment_intent.succeeded", pi.ID)
	require.Equal(t, http.StatusServiceUnavailable, a.deliver(t, payload, testStripeWebhookSecret),
		"nothing can be verified: Stripe keeps the event and sends it again once the secret is set")
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status)
	require.Contains(t, a.s.logText(), "STRIPE_WEBHOOK_SECRET is not set")

	// Another provider: no such endpoint.
	other := startServer(t, dbtest.NewDatabase(t), nil)
	require.Equal(t, http.StatusNotFound, other.send(t, http.MethodPost, StripeWebhookPath, nil, bytes.NewReader(payload)).status)
	require.NotContains(t, other.logText(), "STRIPE_WEBHOOK_SECRET")
}

func TestConfig_StripeWebhookSecret_NeverPrintedAndChecked(t *testing.T) {
	t.Parallel()
	const hook = "whsec_Secretive000000000000"
	cfg, err := LoadConfig(env(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_51Key", "STRIPE_WEBHOOK_SECRET": hook}))
	require.NoError(t, err)
	require.Equal(t, hook, string(cfg.StripeWebhookSecret))
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", cfg, "hook", cfg.StripeWebhookSecret)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "hook", cfg.StripeWebhookSecret)
	asJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	for _, out := range []string{
		fmt.Sprintf("%v %+v %#v %s %q", cfg, cfg, cfg, cfg.StripeWebhookSecret, cfg.StripeWebhookSecret),
		logged.String(), string(asJSON),
	} {
		require.NotContains(t, out, "Secretive")
	}

	cfg, err = LoadConfig(env(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_51Key"}))
	require.NoError(t, err, "optional: the polls and the reconciler work without it")
	require.Empty(t, cfg.StripeWebhookSecret)
	_, err = LoadConfig(env(map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "NATS_URL": "nats://broker:4222",
		"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_0123456789abcdef"}))
	require.NoError(t, err, "optional in production too")

	_, err = LoadConfig(env(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_51Key", "STRIPE_WEBHOOK_SECRET": "sk_test_Secretive"}))
	require.ErrorContains(t, err, "STRIPE_WEBHOOK_SECRET must be a webhook endpoint's signing secret (whsec_…)")
	require.NotContains(t, err.Error(), "Secretive")
}
