package apitest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/graph/graphtest"
	"chargeonce/internal/apiclient"
	"chargeonce/loop"
	"chargeonce/loop/looptest"
	"chargeonce/merchant"
	"chargeonce/metrics/metricstest"
	"chargeonce/payment"
)

// Customer authentication over the real server: a checkout session with a
// returnUrl paid with the publishable key, a card that needs 3-D Secure, the
// simulator's challenge page, and the return.

func TestAuthentication_CheckoutSession_ThroughTheChallengeAndBack_OneCharge(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := ListenOn(t, dbURL, nil)
	_, _, err := merchant.New(pool, false).AddOrigin(context.Background(), "demo", "https://shop.example")
	require.NoError(t, err)
	sess, secret := s.OpenSession(t, SessionInput(4200, "returnUrl", "https://shop.example/checkout/return"))
	key := NewKey()

	first := s.PaySession(t, key, secret, "pm_card_authenticationRequired", nil)
	require.Empty(t, first.Errors)
	waiting := first.Data.ChargeCard
	require.Equal(t, "PROCESSING", waiting.Status)
	require.NotNil(t, waiting.NextAction, "the shopper must authenticate")
	require.Equal(t, apiclient.NextActionTypeRedirect, waiting.NextAction.Type)
	require.NotNil(t, waiting.RetryAfterMs)

	// The page cannot change where the shopper comes back to.
	moved := s.PaySession(t, key, secret, "pm_card_authenticationRequired", map[string]any{"returnUrl": "https://evil.example/"})
	require.Equal(t, "BAD_USER_INPUT", moved.Code(t))

	// Every answer of the attempt carries the same next action: a retry, a poll, the live stream.
	again := s.PaySession(t, key, secret, "pm_card_authenticationRequired", nil)
	require.Equal(t, waiting.NextAction, again.Data.ChargeCard.NextAction)
	polled := s.SessionStatus(t, PublishableKey, key, &secret)
	require.Equal(t, waiting.NextAction.Url, polled.Data.ChargeStatus.NextAction.Url)
	resp, stop := graphtest.PostSSE(t, s.Client, s.URL, Bearer(PublishableKey), SessionUpdatesWithAction,
		map[string]any{"key": key, "session": secret})
	live := graphtest.NewSSE(resp).MustNext(t)
	stop()
	require.Equal(t, "PROCESSING", live.Result.Status)
	require.Equal(t, waiting.NextAction.Url, live.Result.NextAction.Url)

	back := s.PressButton(t, waiting.NextAction.Url, "complete")
	require.Equal(t, "https", back.Scheme)
	require.Equal(t, "shop.example", back.Host)
	require.Equal(t, "/checkout/return", back.Path)
	require.Equal(t, key, back.Query().Get(payment.ReturnKeyParam))

	// The page back from the bank polls with its publishable key: the poll
	// reads the provider (at most once a second per attempt), well before
	// the reconciler's next look (AUTHENTICATION_CHECK_INTERVAL, 15 s).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		done := s.SessionStatus(t, PublishableKey, key, &secret)
		require.Empty(c, done.Errors)
		require.Equal(c, "SUCCEEDED", done.Data.ChargeStatus.Status)
		require.Nil(c, done.Data.ChargeStatus.NextAction)
	}, 5*time.Second, 100*time.Millisecond)
	retried := s.PaySession(t, key, secret, "pm_card_authenticationRequired", nil)
	require.Equal(t, "SUCCEEDED", retried.Data.ChargeCard.Status)
	require.True(t, retried.Data.ChargeCard.Replayed, "a retry of the key after the outcome is a replay")
	charges := s.ProviderChargesOfSession(t, pool, sess.ID)
	require.Len(t, charges, 1, "one payment at the provider")
	require.Equal(t, "succeeded", charges[0].Status)
	paid := s.ReadSession(t, "demo-key", sess.ID)
	require.Equal(t, "PAID", paid.Data.Session.Status)
	require.Equal(t, 1, CountRows(t, pool, `SELECT count(*)::int FROM charge_events WHERE idempotency_key = $1 AND type = 'charge.requires_action'`, key))
}

func TestAuthentication_SecretKey_ReturnURLRules(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := StartOn(t, dbURL, nil)
	in := WithPaymentMethod("pm_card_authenticationRequired")

	without := s.ChargeCard(t, "demo-key", NewKey(), in)
	require.Equal(t, "FAILED", without.Data.ChargeCard.Status, "no returnUrl: as before")
	require.Equal(t, payment.FailureAuthenticationRequired, without.Data.ChargeCard.Failure.Code)

	plain := "http://shop.example/return"
	in.ReturnUrl = &plain
	require.Equal(t, "BAD_USER_INPUT", s.ChargeCard(t, "demo-key", NewKey(), in).Code(t), "plain http off loopback")

	local := "http://127.0.0.1:5173/return"
	in.ReturnUrl = &local
	r := s.ChargeCard(t, "demo-key", NewKey(), in)
	require.Empty(t, r.Errors)
	require.Equal(t, "PROCESSING", r.Data.ChargeCard.Status)
	require.NotNil(t, r.Data.ChargeCard.NextAction)
}

// A checkout session's expiry never cuts an authentication short: the
// session's one open attempt is the one waiting, and its success pays it.
// The metrics count the wait and how it ended.
func TestAuthentication_SessionExpiresMidChallenge_TheWaitStillPaysIt(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, map[string]string{"CLEANUP_INTERVAL": "100ms"})
	_, _, err := merchant.New(pool, false).AddOrigin(context.Background(), "demo", "https://shop.example")
	require.NoError(t, err)
	sess, secret := s.OpenSession(t, SessionInput(900, "returnUrl", "https://shop.example/return", "expiresInSeconds", 1))
	key := NewKey()
	waiting := s.PaySession(t, key, secret, "pm_card_authenticationRequired", nil).Data.ChargeCard
	require.NotNil(t, waiting.NextAction)
	s.OpenSession(t, SessionInput(900, "expiresInSeconds", 1)) // an idle session: expires after sess, with no attempt

	// The sweep that expires the idle session runs past sess's expiry too.
	swept := looptest.WaitFor(t, s.Passes.Retention, 1, func(p loop.Pass) bool {
		r, _ := p.Next.Result.(payment.RetentionResult)
		return r.Sessions > 0
	})
	require.Equal(t, 1, swept[0].Next.Result.(payment.RetentionResult).Sessions, "the idle session alone")
	require.Equal(t, "OPEN", s.ReadSession(t, "demo-key", sess.ID).Data.Session.Status, "not expired while its attempt waits")
	require.Equal(t, "CHECKOUT_SESSION_EXPIRED", s.PaySession(t, NewKey(), secret, "pm_card_visa", nil).Code(t),
		"no new attempt past the expiry; the waiting one goes on")

	s.PressButton(t, waiting.NextAction.Url, "complete")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, "SUCCEEDED", s.SessionStatus(t, PublishableKey, key, &secret).Data.ChargeStatus.Status)
	}, 5*time.Second, 100*time.Millisecond)
	require.Equal(t, "PAID", s.ReadSession(t, "demo-key", sess.ID).Data.Session.Status)

	m := metricstest.Scrape(t, s.Client, s.URL+"/metrics")
	require.Equal(t, 1.0, m.Value("chargeonce_authentication_started_total"))
	require.Equal(t, 1.0, m.Value("chargeonce_authentication_ended_total", "outcome", "completed"))
	require.Equal(t, 1.0, m.Value("chargeonce_authentication_wait_seconds_count"))
	require.Equal(t, 0.0, m.Value("chargeonce_authentication_waiting_attempts"))
}
