package app

import (
	"context"
	"net/url"
	"strings"
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
	"chargeonce/provider/providertest"
)

// Customer authentication over the real server: a checkout session with a
// returnUrl paid with the publishable key, a card that needs 3-D Secure, the
// simulator's challenge page, and the return.

const sessionUpdatesWithAction = `subscription Updates($key: String!, $session: String) {
	chargeUpdated(idempotencyKey: $key, checkoutSession: $session) { ` + payloadFields + ` } }`

// pressButton presses a button of the challenge page at actionURL as the
// shopper's browser does, and returns where it is sent back to. The page is
// the simulator's, under this server's /provider (a test server has no
// public address for the simulator to name: only the path is taken).
func (s *testServer) pressButton(t *testing.T, actionURL, button string) *url.URL {
	t.Helper()
	page, err := url.Parse(actionURL)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(page.Path, "/provider/authenticate/"), actionURL)
	return providertest.PressChallenge(t, s.client, s.URL+page.Path, button)
}

func TestAuthentication_CheckoutSession_ThroughTheChallengeAndBack_OneCharge(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := startListening(t, dbURL, nil)
	_, _, err := merchant.New(pool, false).AddOrigin(context.Background(), "demo", "https://shop.example")
	require.NoError(t, err)
	sess, secret := s.openSession(t, sessionInput(4200, "returnUrl", "https://shop.example/checkout/return"))
	key := newKey()

	first := s.paySession(t, key, secret, "pm_card_authenticationRequired", nil)
	require.Empty(t, first.Errors)
	waiting := first.Data.ChargeCard
	require.Equal(t, "PROCESSING", waiting.Status)
	require.NotNil(t, waiting.NextAction, "the shopper must authenticate")
	require.Equal(t, apiclient.NextActionTypeRedirect, waiting.NextAction.Type)
	require.NotNil(t, waiting.RetryAfterMs)

	// The page cannot change where the shopper comes back to.
	moved := s.paySession(t, key, secret, "pm_card_authenticationRequired", map[string]any{"returnUrl": "https://evil.example/"})
	require.Equal(t, "BAD_USER_INPUT", moved.code(t))

	// Every answer of the attempt carries the same next action: a retry, a poll, the live stream.
	again := s.paySession(t, key, secret, "pm_card_authenticationRequired", nil)
	require.Equal(t, waiting.NextAction, again.Data.ChargeCard.NextAction)
	polled := s.sessionStatus(t, publishableKey, key, &secret)
	require.Equal(t, waiting.NextAction.Url, polled.Data.ChargeStatus.NextAction.Url)
	resp, stop := graphtest.PostSSE(t, s.client, s.URL, bearer(publishableKey), sessionUpdatesWithAction,
		map[string]any{"key": key, "session": secret})
	live := graphtest.NewSSE(resp).MustNext(t)
	stop()
	require.Equal(t, "PROCESSING", live.Result.Status)
	require.Equal(t, waiting.NextAction.Url, live.Result.NextAction.Url)

	back := s.pressButton(t, waiting.NextAction.Url, "complete")
	require.Equal(t, "https", back.Scheme)
	require.Equal(t, "shop.example", back.Host)
	require.Equal(t, "/checkout/return", back.Path)
	require.Equal(t, key, back.Query().Get(payment.ReturnKeyParam))

	// The page back from the bank polls with its publishable key: the poll
	// reads the provider (at most once a second per attempt), well before
	// the reconciler's next look (AUTHENTICATION_CHECK_INTERVAL, 15 s).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		done := s.sessionStatus(t, publishableKey, key, &secret)
		require.Empty(c, done.Errors)
		require.Equal(c, "SUCCEEDED", done.Data.ChargeStatus.Status)
		require.Nil(c, done.Data.ChargeStatus.NextAction)
	}, 5*time.Second, 100*time.Millisecond)
	retried := s.paySession(t, key, secret, "pm_card_authenticationRequired", nil)
	require.Equal(t, "SUCCEEDED", retried.Data.ChargeCard.Status)
	require.True(t, retried.Data.ChargeCard.Replayed, "a retry of the key after the outcome is a replay")
	require.Equal(t, 1, providerChargesOfSession(t, pool, sess.ID), "one payment at the provider")
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*)::int FROM cardsim.charges c JOIN charge_attempts a ON c.idempotency_key = a.provider_key
		WHERE a.checkout_session_id = $1 AND c.status = 'succeeded'`, sess.ID))
	paid := s.readSession(t, "demo-key", sess.ID)
	require.Equal(t, "PAID", paid.Data.Session.Status)
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*)::int FROM charge_events WHERE idempotency_key = $1 AND type = 'charge.requires_action'`, key))
}

func TestAuthentication_SecretKey_ReturnURLRules(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, nil)
	in := withPaymentMethod("pm_card_authenticationRequired")

	without := s.chargeCard(t, "demo-key", newKey(), in)
	require.Equal(t, "FAILED", without.Data.ChargeCard.Status, "no returnUrl: as before")
	require.Equal(t, payment.FailureAuthenticationRequired, without.Data.ChargeCard.Failure.Code)

	plain := "http://shop.example/return"
	in.ReturnUrl = &plain
	require.Equal(t, "BAD_USER_INPUT", s.chargeCard(t, "demo-key", newKey(), in).code(t), "plain http off loopback")

	local := "http://127.0.0.1:5173/return"
	in.ReturnUrl = &local
	r := s.chargeCard(t, "demo-key", newKey(), in)
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
	s := startServer(t, dbURL, map[string]string{"CLEANUP_INTERVAL": "100ms"})
	_, _, err := merchant.New(pool, false).AddOrigin(context.Background(), "demo", "https://shop.example")
	require.NoError(t, err)
	sess, secret := s.openSession(t, sessionInput(900, "returnUrl", "https://shop.example/return", "expiresInSeconds", 1))
	key := newKey()
	waiting := s.paySession(t, key, secret, "pm_card_authenticationRequired", nil).Data.ChargeCard
	require.NotNil(t, waiting.NextAction)
	s.openSession(t, sessionInput(900, "expiresInSeconds", 1)) // an idle session: expires after sess, with no attempt

	// The sweep that expires the idle session runs past sess's expiry too.
	swept := looptest.WaitFor(t, s.passes.Retention, 1, func(p loop.Pass) bool {
		r, _ := p.Next.Result.(payment.RetentionResult)
		return r.Sessions > 0
	})
	require.Equal(t, 1, swept[0].Next.Result.(payment.RetentionResult).Sessions, "the idle session alone")
	require.Equal(t, "OPEN", s.readSession(t, "demo-key", sess.ID).Data.Session.Status, "not expired while its attempt waits")
	require.Equal(t, "CHECKOUT_SESSION_EXPIRED", s.paySession(t, newKey(), secret, "pm_card_visa", nil).code(t),
		"no new attempt past the expiry; the waiting one goes on")

	s.pressButton(t, waiting.NextAction.Url, "complete")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, "SUCCEEDED", s.sessionStatus(t, publishableKey, key, &secret).Data.ChargeStatus.Status)
	}, 5*time.Second, 100*time.Millisecond)
	require.Equal(t, "PAID", s.readSession(t, "demo-key", sess.ID).Data.Session.Status)

	m := metricstest.Scrape(t, s.client, s.URL+"/metrics")
	require.Equal(t, 1.0, m.Value("chargeonce_authentication_started_total"))
	require.Equal(t, 1.0, m.Value("chargeonce_authentication_ended_total", "outcome", "completed"))
	require.Equal(t, 1.0, m.Value("chargeonce_authentication_wait_seconds_count"))
	require.Equal(t, 0.0, m.Value("chargeonce_authentication_waiting_attempts"))
}
