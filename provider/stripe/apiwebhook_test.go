package stripe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"

	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/app"
	"chargeonce/loop/looptest"
	"chargeonce/metrics/metricstest"
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
	s    *apitest.Server
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
	return stripeAuth{s: apitest.StartOn(t, dbURL, vars), fake: fake, pool: dbtest.Open(t, dbURL)}
}

// chargeWaiting charges a card that needs 3-D Secure with a returnUrl under
// key; the attempt must wait for the shopper at one PaymentIntent.
func (a stripeAuth) chargeWaiting(t *testing.T, key string) (*apiclient.ChargeResult, stripefake.Intent) {
	t.Helper()
	in := apitest.WithPaymentMethod("pm_card_authenticationRequired")
	in.ReturnUrl = new(shopperReturnURL)
	r := a.s.ChargeCard(t, "demo-key", key, in)
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
	apitest.Helper(t)
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
	return a.s.Send(t, http.MethodPost, app.StripeWebhookPath, h, bytes.NewReader(payload)).Status
}

// reads counts the API requests the fake Stripe has received.
func (a stripeAuth) reads() int { return len(a.fake.Calls()) }

func (a stripeAuth) events(t *testing.T, key, typ string) int {
	t.Helper()
	return apitest.CountRows(t, a.pool, `SELECT count(*)::int FROM charge_events WHERE idempotency_key = $1 AND type = $2`, key, typ)
}

func TestStripe_Authentication_RedirectToTheChallengeAndBack_RetryOfTheKeyFindsItSucceeded(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, map[string]string{"STRIPE_WEBHOOK_SECRET": ""}) // no webhook: polls only
	key := apitest.NewKey()
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
	in := apitest.WithPaymentMethod("pm_card_authenticationRequired")
	in.ReturnUrl = new(shopperReturnURL)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		done := a.s.ChargeCard(c, "demo-key", key, in)
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
	key := apitest.NewKey()
	_, pi := a.chargeWaiting(t, key)
	before := a.reads()
	looked := looptest.WaitFor(t, a.s.Passes.Reconcile, 1, apitest.TookOver)
	require.Equal(t, payment.ReconcileResult{Taken: 1, Open: 1}, looked[0].Next.Result, "the reconciler has looked, and left it waiting")
	require.Greater(t, a.reads(), before, "it read Stripe")
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
	key := apitest.NewKey()
	_, pi := a.chargeWaiting(t, key)
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID))
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status, "chargeonce has not read Stripe since")

	before := a.reads()
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.succeeded", pi.ID), testStripeWebhookSecret))
	status, _ = a.stored(t, key)
	require.Equal(t, "SUCCEEDED", status, "recorded before the endpoint answered")
	require.Greater(t, a.reads(), before, "chargeonce read the PaymentIntent from Stripe: the event decides nothing")

	final := a.s.ChargeStatus(t, "demo-key", key).Data.ChargeStatus
	require.Equal(t, "SUCCEEDED", final.Status)
	require.Equal(t, pi.ID, final.Charge.ProviderChargeId)
	require.Len(t, a.fake.ClientIntents(key), 1, "one charge")
	require.Equal(t, 1, a.events(t, key, "charge.succeeded"))
	require.Contains(t, a.s.LogText(), "stripe_event_type=payment_intent.succeeded")
	require.NotContains(t, a.s.LogText(), testStripeWebhookSecret)
}

func TestStripe_Webhook_ForgedSignature_RefusedAndNothingRead(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	key := apitest.NewKey()
	_, pi := a.chargeWaiting(t, key)
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID)) // a read now would finalize it
	payload := a.fake.Event("payment_intent.succeeded", pi.ID)

	before := a.reads()
	require.Equal(t, http.StatusBadRequest, a.deliver(t, payload, "whsec_forged_0000000000"))
	require.Equal(t, http.StatusBadRequest, a.deliver(t, payload, ""), "unsigned")
	require.Equal(t, http.StatusBadRequest, a.s.Send(t, http.MethodPost, app.StripeWebhookPath,
		http.Header{"Stripe-Signature": {"t=1,v1=00"}}, bytes.NewReader(payload)).Status, "signed long ago, by nobody")
	require.Equal(t, before, a.reads(), "nothing read from Stripe")
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status, "the attempt unchanged")
	require.Contains(t, a.s.LogText(), "refused a Stripe webhook request")
}

func TestStripe_Webhook_RedeliveredAndOutOfOrder_ChangeNothing(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	key := apitest.NewKey()
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
	key := apitest.NewKey()
	waiting, pi := a.chargeWaiting(t, key)
	providertest.PressChallenge(t, nil, waiting.NextAction.Url, "fail")

	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.payment_failed", pi.ID), testStripeWebhookSecret))
	status, code := a.stored(t, key)
	require.Equal(t, "FAILED", status)
	require.Equal(t, payment.FailureAuthenticationFailed, code)
	failed := a.s.ChargeStatus(t, "demo-key", key).Data.ChargeStatus
	require.Equal(t, payment.FailureAuthenticationFailed, failed.Failure.Code)
	require.Equal(t, "The card's authentication (3-D Secure) failed. The card was not charged.", failed.Failure.Message)
	require.Nil(t, failed.NextAction)
	require.Equal(t, "requires_payment_method", a.fake.ClientIntents(key)[0].Status)
}

func TestStripe_Authentication_Abandoned_CancelledAtStripe_AuthenticationAbandoned(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, map[string]string{"AUTHENTICATION_WINDOW": "1s",
		"AUTHENTICATION_CHECK_INTERVAL": "200ms", "RECONCILE_INTERVAL": "100ms"})
	key := apitest.NewKey()
	_, pi := a.chargeWaiting(t, key)
	a.eventually(t, key, "FAILED", payment.FailureAuthenticationAbandoned)
	cancelled := a.fake.ClientIntents(key)[0]
	require.Equal(t, "canceled", cancelled.Status, "the PaymentIntent can never be completed now")
	require.Equal(t, "abandoned", cancelled.CancellationReason)

	// Stripe's event of the cancel: nothing left to do.
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.canceled", pi.ID), testStripeWebhookSecret))
	r := a.s.ChargeStatus(t, "demo-key", key).Data.ChargeStatus
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
	key := apitest.NewKey()
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
	r := a.s.ChargeStatus(t, "demo-key", key).Data.ChargeStatus
	require.Equal(t, pi.ID, r.Charge.ProviderChargeId)
}

func TestStripe_Authentication_WithoutReturnURL_AuthenticationRequired(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	key := apitest.NewKey()
	r := a.s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod("pm_card_authenticationRequired")).Data.ChargeCard
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
	key := apitest.NewKey()
	_, pi := a.chargeWaiting(t, key)
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID))
	payload := a.fake.Event("payment_intent.succeeded", pi.ID)
	require.Equal(t, http.StatusServiceUnavailable, a.deliver(t, payload, testStripeWebhookSecret),
		"nothing can be verified: Stripe keeps the event and sends it again once the secret is set")
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status)
	require.Contains(t, a.s.LogText(), "STRIPE_WEBHOOK_SECRET is not set")

	// Another provider: no such endpoint.
	other := apitest.Start(t, nil)
	require.Equal(t, http.StatusNotFound, other.Send(t, http.MethodPost, app.StripeWebhookPath, nil, bytes.NewReader(payload)).Status)
	require.NotContains(t, other.LogText(), "STRIPE_WEBHOOK_SECRET")
}

// stripeAuthListening is stripeAuthServer on a real loopback listener: for
// what comes from several client addresses, or over a raw connection.
func stripeAuthListening(t *testing.T, env map[string]string) stripeAuth {
	t.Helper()
	dbURL := dbtest.NewDatabase(t)
	fake := stripefake.Start(t)
	vars := fake.Env(map[string]string{"STRIPE_WEBHOOK_SECRET": testStripeWebhookSecret, "AUTHENTICATION_CHECK_INTERVAL": "1h"}, env)
	return stripeAuth{s: apitest.ListenOn(t, dbURL, vars), fake: fake, pool: dbtest.Open(t, dbURL)}
}

// postFrom posts payload to the webhook endpoint over client, signed now
// with secret ("" for no signature), and returns the answer.
func (a stripeAuth) postFrom(t require.TestingT, client *http.Client, payload []byte, secret string) (*http.Response, error) {
	apitest.Helper(t)
	req, err := http.NewRequest(http.MethodPost, a.s.URL+app.StripeWebhookPath, bytes.NewReader(payload))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if secret != "" {
		req.Header.Set("Stripe-Signature", stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
			Payload: payload, Secret: secret, Timestamp: time.Now()}).Header)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// refusalLines counts the WARN lines of refused webhook requests.
func refusalLines(logs string) int {
	n := 0
	for l := range strings.Lines(logs) {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "refused a Stripe webhook request") {
			n++
		}
	}
	return n
}

// TestStripe_Webhook_UnsignedFlood_CountedAndLoggedSampled: a stranger
// posts 40 unsigned events from one address. Each is refused (400) and
// counted, the log gets one line per reason and interval (not 40), nothing
// is read from Stripe, and Stripe's own signed event, from its address, is
// served.
func TestStripe_Webhook_UnsignedFlood_CountedAndLoggedSampled(t *testing.T) {
	t.Parallel()
	a := stripeAuthListening(t, nil)
	key := apitest.NewKey()
	_, pi := a.chargeWaiting(t, key)
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID)) // a read now would finalize it
	payload := a.fake.Event("payment_intent.succeeded", pi.ID)

	stranger := apitest.ClientBoundTo(t, "127.0.0.7")
	before := a.reads()
	started := time.Now()
	for i := range 40 {
		resp, err := a.postFrom(t, stranger, payload, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "post %d", i)
	}
	elapsed := time.Since(started)
	require.Equal(t, before, a.reads(), "nothing read from Stripe")
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status)

	m := metricstest.Scrape(t, a.s.Client, a.s.URL+"/metrics")
	require.Equal(t, 40.0, m.Value("chargeonce_stripe_webhook_refused_total", "reason", "no_signature"))
	require.Equal(t, 40.0, m.Value("chargeonce_stripe_webhook_refused_total"), "every refusal counted, under its reason")
	logs := a.s.LogText()
	intervals := 1 + int(elapsed/stripe.WebhookRefusalLogIntervalDefault)
	require.LessOrEqual(t, refusalLines(logs), intervals, "one line per reason and interval, not one per request:\n%s", logs)
	require.Contains(t, logs, `reason=no_signature detail="no Stripe-Signature header" remote=127.0.0.7`)

	// Stripe, from another address, is served.
	resp, err := a.postFrom(t, apitest.ClientBoundTo(t, "127.0.0.8"), payload, testStripeWebhookSecret)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	a.eventually(t, key, "SUCCEEDED", "")
}

// TestStripe_Webhook_PerAddressLimit_RefusesPastTheBurst: 40 concurrent
// unsigned posts from one address on a limit of bursts of 10: 10 are
// refused for their signature, 30 by the limit (429 with Retry-After)
// before anything is read; another address is still served.
func TestStripe_Webhook_PerAddressLimit_RefusesPastTheBurst(t *testing.T) {
	t.Parallel()
	a := stripeAuthListening(t, map[string]string{"RATE_LIMIT_STRIPE_WEBHOOK_IP": "0.001", "RATE_LIMIT_STRIPE_WEBHOOK_IP_BURST": "10"})
	key := apitest.NewKey()
	_, pi := a.chargeWaiting(t, key)
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID))
	payload := a.fake.Event("payment_intent.succeeded", pi.ID)

	stranger := apitest.ClientBoundTo(t, "127.0.0.7")
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			resp, err := a.postFrom(t, stranger, payload, "")
			if !assert.NoError(t, err) {
				return
			}
			if resp.StatusCode == http.StatusTooManyRequests {
				assert.NotEmpty(t, resp.Header.Get("Retry-After"))
			}
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusBadRequest: 10, http.StatusTooManyRequests: 30}, statuses)
	m := metricstest.Scrape(t, a.s.Client, a.s.URL+"/metrics")
	require.Equal(t, 10.0, m.Value("chargeonce_stripe_webhook_refused_total", "reason", "no_signature"))
	require.Equal(t, 30.0, m.Value("chargeonce_stripe_webhook_refused_total", "reason", "rate_limited"))
	require.LessOrEqual(t, refusalLines(a.s.LogText()), 4, "a line or two per reason:\n%s", a.s.LogText())

	resp, err := a.postFrom(t, apitest.ClientBoundTo(t, "127.0.0.8"), payload, testStripeWebhookSecret)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "another address has its own allowance")
	a.eventually(t, key, "SUCCEEDED", "")
}

// TestStripe_Webhook_LargerThanAnEvent_413Unread: a body announced larger
// than an event is refused before the endpoint reads it (the answer comes
// while the client has sent 1 KiB of its 100 MB), one sent without a
// length is refused at the bound, and a signed event of the bound's size
// is served.
func TestStripe_Webhook_LargerThanAnEvent_413Unread(t *testing.T) {
	t.Parallel()
	a := stripeAuthListening(t, nil)
	key := apitest.NewKey()
	_, pi := a.chargeWaiting(t, key)
	require.NoError(t, a.fake.CompleteAuthentication(pi.ID))
	payload := a.fake.Event("payment_intent.succeeded", pi.ID)

	u, err := url.Parse(a.s.URL)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nStripe-Signature: t=1,v1=00\r\n\r\n%s",
		app.StripeWebhookPath, u.Host, 100<<20, bytes.Repeat([]byte(" "), 1<<10))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "answered before the body came")
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	// No length: read up to the bound, then refused.
	req, err := http.NewRequest(http.MethodPost, a.s.URL+app.StripeWebhookPath,
		io.MultiReader(bytes.NewReader(bytes.Repeat([]byte(" "), stripe.WebhookMaxBodyBytes)), bytes.NewReader(payload)))
	require.NoError(t, err)
	req.ContentLength = -1
	chunked, err := a.s.Client.Do(req)
	require.NoError(t, err)
	chunked.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, chunked.StatusCode)

	m := metricstest.Scrape(t, a.s.Client, a.s.URL+"/metrics")
	require.Equal(t, 2.0, m.Value("chargeonce_stripe_webhook_refused_total", "reason", "too_large"))
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status)

	// An event as large as the bound is read and served.
	padded := append(bytes.Repeat([]byte(" "), stripe.WebhookMaxBodyBytes-len(payload)), payload...)
	require.Len(t, padded, stripe.WebhookMaxBodyBytes)
	ok, err := a.postFrom(t, a.s.Client, padded, testStripeWebhookSecret)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, ok.StatusCode)
	a.eventually(t, key, "SUCCEEDED", "")
}
