package apitest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/events/eventstest"
	"chargeonce/graph/graphtest"
	"chargeonce/internal/apiclient"
	"chargeonce/merchant"
	"chargeonce/metrics/metricstest"
	"chargeonce/provider/stripe/stripefake"
	"chargeonce/webhook"
)

// The browser half: publishable keys and checkout sessions. The demo
// merchant's development keys: demo-key (secret) and co_pk_demo
// (publishable).

func TestPublishableKey_AloneRunsNothing(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, nil)
	sess, _ := s.OpenSession(t, SessionInput(1999))
	key := NewKey()
	for name, tt := range map[string]struct {
		query string
		vars  map[string]any
		field string
	}{
		"chargeCard without a session":   {ChargeCardMutation, map[string]any{"key": key, "input": Visa(1999)}, "chargeCard"},
		"chargeStatus without a session": {ChargeStatusQuery, map[string]any{"key": key}, "chargeStatus"},
		"createCheckoutSession":          {CreateSessionMutation, map[string]any{"key": key, "input": SessionInput(5000)}, "createCheckoutSession"},
		"checkoutSession":                {SessionQuery, map[string]any{"id": sess.ID}, "checkoutSession"},
		"introspection":                  {`{ __schema { types { name } } }`, nil, "__schema"},
		"two fields, one forbidden":      {`query Q($id: ID!) { chargeStatus(idempotencyKey: "x") { status } checkoutSession(id: $id) { id } }`, map[string]any{"id": sess.ID}, "checkoutSession"},
	} {
		t.Run(name, func(t *testing.T) {
			var r Response
			raw := s.Post(t, PublishableKey, nil, tt.query, tt.vars, &r)
			require.Equal(t, "FORBIDDEN", r.Code(t), "%s", raw.Body)
			require.Equal(t, http.StatusForbidden, raw.Status)
			msg := r.Errors[0].Message
			require.True(t, strings.Contains(msg, "secret key") || strings.Contains(msg, "checkout session"), msg)
			var data map[string]any
			require.NoError(t, json.Unmarshal(raw.Body, &struct {
				Data *map[string]any `json:"data"`
			}{&data}))
			for field, v := range data {
				require.Nil(t, v, "%s: nothing ran", field)
			}
		})
	}
	require.Zero(t, AttemptsOf(t, pool, key), "nothing was claimed")
	require.Equal(t, 1, CountRows(t, pool, "SELECT count(*)::int FROM checkout_sessions"), "no session was created")
	charges, err := s.API("").ListProviderCharges(context.Background(), apiclient.ProviderChargeFilter{})
	require.NoError(t, err)
	require.Empty(t, charges, "nothing reached the provider")
}

func TestCheckoutSession_PaysOnlyItsTerms(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, nil)
	sess, secret := s.OpenSession(t, SessionInput(1999, "orderId", "order-7", "description", "two socks"))
	require.Equal(t, "OPEN", sess.Status)
	require.Equal(t, 0, sess.Attempts)
	require.Equal(t, 5, sess.MaxAttempts)

	// A page that changes what is paid is refused, naming the field, and
	// nothing is claimed or charged.
	changed := map[string]map[string]any{
		"input.amount":      {"amount": 1},
		"input.currency":    {"currency": "EUR"},
		"input.orderId":     {"orderId": "order-8"},
		"input.description": {"description": "one sock"},
	}
	var refusedKeys []string
	for field, extra := range changed {
		key := NewKey()
		refusedKeys = append(refusedKeys, key)
		r := s.PaySession(t, key, secret, "pm_card_visa", extra)
		require.Equal(t, "BAD_USER_INPUT", r.Code(t), field)
		require.Equal(t, field, r.Errors[0].Extensions["field"])
	}
	require.Zero(t, AttemptsOf(t, pool, refusedKeys...))
	require.Empty(t, s.ProviderChargesOfSession(t, pool, sess.ID))

	// Terms equal to the session's are accepted; the charge is the session's.
	key := NewKey()
	paid := s.PaySession(t, key, secret, "pm_card_visa", map[string]any{"amount": 1999, "currency": "USD"}).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", paid.Status)
	require.Equal(t, 1999, paid.Charge.Amount)
	require.Equal(t, "USD", paid.Charge.Currency)
	require.Equal(t, "order-7", *paid.Charge.OrderId)
	replay := s.PaySession(t, key, secret, "pm_card_visa", nil).Data.ChargeCard
	require.True(t, replay.Replayed, "the same key without the terms is the same request")
	require.Equal(t, paid.Charge.Id, replay.Charge.Id)

	// The merchant's server reads the session back: paid by that charge,
	// and without its client secret.
	back := s.ReadSession(t, "demo-key", sess.ID)
	require.Empty(t, back.Errors)
	require.Equal(t, "PAID", back.Data.Session.Status)
	require.Equal(t, paid.Charge.Id, back.Data.Session.Charge.ID)
	require.Equal(t, 1, back.Data.Session.Attempts)
	require.Nil(t, back.Data.Session.ClientSecret)
	require.Len(t, s.ProviderChargesOfSession(t, pool, sess.ID), 1)

	// A secret that is not the session's pays nothing.
	forged := strings.TrimSuffix(secret, secret[len(secret)-4:]) + "AAAA"
	for _, bad := range []string{forged, "cs_nonsense", ""} {
		r := s.PaySession(t, NewKey(), bad, "pm_card_visa", nil)
		require.Equal(t, "NOT_FOUND", r.Code(t), bad)
		require.Equal(t, "input.checkoutSession", r.Errors[0].Extensions["field"])
	}
	// Another merchant's secret key cannot read the session.
	_, otherKey, err := merchant.New(dbtest.Open(t, dbURL), false).CreateAPIKey(context.Background(), "other", merchant.KeySecret)
	require.NoError(t, err)
	require.Nil(t, s.ReadSession(t, otherKey, sess.ID).Data.Session)
}

func TestCheckoutSession_ConcurrentKeys_OneCharge(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	// Every request in flight holds one of its address's card-testing
	// allowance, and here 50 shoppers share one address; they and the
	// retries after them are more than its publishable burst, which the
	// test does not wait to refill.
	s := StartOn(t, dbURL, map[string]string{"RATE_LIMIT_DECLINES_IP_BURST": "50", "RATE_LIMIT_PUBLISHABLE_IP_BURST": "100"})
	sess, secret := s.OpenSession(t, SessionInput(4200, "orderId", "order-50"))

	// A second session for the order is refused while the first is open.
	second := s.CreateSession(t, "demo-key", NewKey(), SessionInput(4200, "orderId", "order-50"))
	require.Equal(t, "ORDER_ALREADY_PAID", second.Code(t))

	const n = 50
	answers := make([]Response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = s.PaySession(t, NewKey(), secret, "pm_card_visa", nil)
		})
	}
	close(start)
	wg.Wait()
	codes := map[string]int{}
	for i, r := range answers {
		switch {
		case len(r.Errors) > 0:
			codes[r.Code(t)]++
		default:
			require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status, "answer %d", i)
			codes["SUCCEEDED"]++
		}
	}
	t.Logf("answers of %d keys paying one session: %v", n, codes)
	require.Equal(t, map[string]int{"SUCCEEDED": 1, "CHECKOUT_SESSION_PAID": n - 1}, codes)
	require.Len(t, s.ProviderChargesOfSession(t, pool, sess.ID), 1, "one charge reached the provider")
	require.Equal(t, 1, CountRows(t, pool, "SELECT count(*)::int FROM charges"))
	require.Equal(t, 1, CountRows(t, pool, "SELECT attempts FROM checkout_sessions WHERE id = $1", sess.ID), "refused keys are not attempts")

	// Paid, the order still refuses a second session, and the session a new key.
	again := s.CreateSession(t, "demo-key", NewKey(), SessionInput(4200, "orderId", "order-50"))
	require.Equal(t, "ORDER_ALREADY_PAID", again.Code(t))
	require.Equal(t, "CHECKOUT_SESSION_PAID", s.PaySession(t, NewKey(), secret, "pm_card_visa", nil).Code(t))
	// As does a secret key paying the session.
	r := s.ChargeCardRaw(t, "demo-key", NewKey(), map[string]any{"paymentMethod": "pm_card_visa", "checkoutSession": secret})
	require.Equal(t, "CHECKOUT_SESSION_PAID", r.Code(t))
	require.Len(t, s.ProviderChargesOfSession(t, pool, sess.ID), 1)
}

func TestCheckoutSession_Expiry_RefusesNewAttempts_FinishesARunningOne(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, map[string]string{"SIM_SLOW_DELAY": "3500ms", "CLEANUP_INTERVAL": "200ms"})

	// An attempt that starts before the session expires finishes after it.
	running, runningSecret := s.OpenSession(t, SessionInput(700, "expiresInSeconds", 2))
	slowKey := NewKey()
	slow := s.PaySession(t, slowKey, runningSecret, "pm_card_slow", nil).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", slow.Status)
	expiresAt, err := time.Parse(time.RFC3339Nano, running.ExpiresAt)
	require.NoError(t, err)
	require.True(t, time.Now().After(expiresAt), "it finished after the expiry")
	require.Equal(t, "PAID", s.ReadSession(t, "demo-key", running.ID).Data.Session.Status)

	// A new attempt after the expiry is refused, and claims nothing.
	expired, expiredSecret := s.OpenSession(t, SessionInput(800, "expiresInSeconds", 2, "orderId", "order-x"))
	expiredAt, err := time.Parse(time.RFC3339Nano, expired.ExpiresAt)
	require.NoError(t, err)
	time.Sleep(time.Until(expiredAt.Add(100 * time.Millisecond)))
	late := NewKey()
	require.Equal(t, "CHECKOUT_SESSION_EXPIRED", s.PaySession(t, late, expiredSecret, "pm_card_visa", nil).Code(t))
	require.Zero(t, AttemptsOf(t, pool, late))
	require.Equal(t, "EXPIRED", s.ReadSession(t, "demo-key", expired.ID).Data.Session.Status)
	// Expired, it no longer holds its order: a new session may pay it.
	next, _ := s.OpenSession(t, SessionInput(800, "orderId", "order-x"))
	require.Equal(t, "OPEN", next.Status)
	// The retry of the slow key is still answered from its attempt.
	require.True(t, s.PaySession(t, slowKey, runningSecret, "pm_card_slow", nil).Data.ChargeCard.Replayed)

	// The sweep marks it expired, with its event; the paid one got only its paid event.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, 1, CountRows(c, pool, "SELECT count(*)::int FROM charge_events WHERE type = 'checkout_session.expired' AND checkout_session_id = $1", expired.ID))
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, "EXPIRED", dbtest.Query[string](t, pool, "SELECT status FROM checkout_sessions WHERE id = $1", expired.ID)[0])
	require.Equal(t, []string{"checkout_session.paid"}, dbtest.Query[string](t, dbtest.Open(t, dbURL),
		"SELECT type FROM charge_events WHERE checkout_session_id = $1", running.ID))
}

func TestCheckoutSession_MaxAttempts_LockTheSession(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, map[string]string{"SESSION_MAX_ATTEMPTS": "3"})
	sess, secret := s.OpenSession(t, SessionInput(1500))
	var declinedKeys []string
	for range 3 {
		key := NewKey()
		declinedKeys = append(declinedKeys, key)
		r := s.PaySession(t, key, secret, "pm_card_chargeDeclined", nil).Data.ChargeCard
		require.Equal(t, "FAILED", r.Status, "a decline leaves the session open for a new key")
	}
	locked := NewKey()
	r := s.PaySession(t, locked, secret, "pm_card_visa", nil)
	require.Equal(t, "CHECKOUT_SESSION_LOCKED", r.Code(t))
	require.Contains(t, r.Errors[0].Message, "create a new one")
	require.Zero(t, AttemptsOf(t, pool, locked))
	require.Len(t, s.ProviderChargesOfSession(t, pool, sess.ID), 3, "nothing more reached the provider")
	// Retries of the declined keys are still answered.
	require.True(t, s.PaySession(t, declinedKeys[2], secret, "pm_card_chargeDeclined", nil).Data.ChargeCard.Replayed)
	back := s.ReadSession(t, "demo-key", sess.ID).Data.Session
	require.Equal(t, "OPEN", back.Status)
	require.Equal(t, 3, back.Attempts)
	require.Equal(t, 3, back.MaxAttempts)
	require.Equal(t, 1.0, metricstest.Scrape(t, s.Client, s.URL+"/metrics").Value("chargeonce_checkout_session_refused_total", "reason", "locked"))
}

func TestCheckoutSession_CrossSessionReads_RevealNothing(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := ListenOn(t, dbURL, nil)
	_, secretA := s.OpenSession(t, SessionInput(100))
	_, secretB := s.OpenSession(t, SessionInput(200))
	keyB := NewKey()
	require.Equal(t, "SUCCEEDED", s.PaySession(t, keyB, secretB, "pm_card_visa", nil).Data.ChargeCard.Status)
	direct := NewKey()
	require.Equal(t, "SUCCEEDED", s.ChargeCard(t, "demo-key", direct, Visa(300)).Data.ChargeCard.Status)

	// With session A, nothing of B's attempt, nor of a charge without a
	// session, by any key.
	for _, key := range []string{keyB, direct, NewKey()} {
		r := s.SessionStatus(t, PublishableKey, key, &secretA)
		require.Empty(t, r.Errors)
		require.Nil(t, r.Data.ChargeStatus, "key %s", key)
	}
	require.Equal(t, "SUCCEEDED", s.SessionStatus(t, PublishableKey, keyB, &secretB).Data.ChargeStatus.Status)
	require.Equal(t, "SUCCEEDED", s.SessionStatus(t, "demo-key", keyB, &secretB).Data.ChargeStatus.Status, "the secret key reads every attempt of a session")
	require.Equal(t, "SUCCEEDED", s.SessionStatus(t, "demo-key", keyB, nil).Data.ChargeStatus.Status, "and by the page's key alone")

	// Nor by subscription, over either stream.
	resp, _ := graphtest.PostSSE(t, s.Client, s.URL, Bearer(PublishableKey), SessionUpdatesSubscription,
		map[string]any{"key": keyB, "session": secretA})
	sse := graphtest.NewSSE(resp)
	require.Equal(t, http.StatusOK, sse.Resp.StatusCode, "the stream opens, and answers the key as unknown")
	require.Equal(t, "NOT_FOUND", sse.MustNext(t).Code(t))
	ws := graphtest.DialWS(t, s.URL, nil)
	ack, err := ws.Init(t, map[string]any{"authorization": "Bearer " + PublishableKey})
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	ws.Subscribe(t, "1", SessionUpdatesSubscription, map[string]any{"key": keyB, "session": secretA})
	require.Equal(t, "NOT_FOUND", ws.Next(t, "1").Code(t))
	require.True(t, ws.Next(t, "1").Complete)
	ws.Subscribe(t, "2", SessionUpdatesSubscription, map[string]any{"key": keyB})
	require.Equal(t, "FORBIDDEN", ws.Next(t, "2").Code(t), "a publishable key subscribes only with a session")
	require.True(t, ws.Next(t, "2").Complete)
	ws.Subscribe(t, "3", SessionUpdatesSubscription, map[string]any{"key": keyB, "session": secretB})
	ok := ws.Next(t, "3")
	require.Empty(t, ok.Errors)
	require.Equal(t, "SUCCEEDED", ok.Result.Status)
}

func TestCreateCheckoutSession_ReplayAndMismatch_SecretOnlyAsHash(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, nil)
	key := NewKey()
	input := SessionInput(2500, "orderId", "order-r", "returnUrl", "https://shop.example/return")
	unregistered := s.CreateSession(t, "demo-key", key, input)
	require.Equal(t, "BAD_USER_INPUT", unregistered.Code(t), "a returnUrl off the merchant's registered origins")
	require.Contains(t, unregistered.Errors[0].Message, "chargeonce merchant origins add demo https://shop.example")
	_, _, err := merchant.New(pool, false).AddOrigin(context.Background(), "demo", "https://shop.example")
	require.NoError(t, err)
	created := s.CreateSession(t, "demo-key", key, input)
	require.Empty(t, created.Errors)
	require.False(t, created.Data.Create.Replayed)
	secret := *created.Data.Create.Session.ClientSecret
	require.True(t, strings.HasPrefix(secret, "cs_"), secret)
	require.GreaterOrEqual(t, len(secret), 80, "long")

	replay := s.CreateSession(t, "demo-key", key, input)
	require.Empty(t, replay.Errors)
	require.True(t, replay.Data.Create.Replayed)
	require.Equal(t, created.Data.Create.Session.ID, replay.Data.Create.Session.ID)
	require.Equal(t, secret, *replay.Data.Create.Session.ClientSecret, "the replay shows the same secret")

	for field, other := range map[string]map[string]any{
		"amount":           SessionInput(2501, "orderId", "order-r", "returnUrl", "https://shop.example/return"),
		"returnUrl":        SessionInput(2500, "orderId", "order-r"),
		"expiresInSeconds": SessionInput(2500, "orderId", "order-r", "returnUrl", "https://shop.example/return", "expiresInSeconds", 60),
	} {
		require.Equal(t, "IDEMPOTENCY_KEY_REUSED", s.CreateSession(t, "demo-key", key, other).Code(t), field)
	}
	// Bad input, each naming its field.
	for field, bad := range map[string]map[string]any{
		"input.amount":           SessionInput(0),
		"input.currency":         {"amount": 100, "currency": "XTS"},
		"input.returnUrl":        SessionInput(100, "returnUrl", "javascript:alert(1)"),
		"input.expiresInSeconds": SessionInput(100, "expiresInSeconds", 86401),
	} {
		r := s.CreateSession(t, "demo-key", NewKey(), bad)
		require.Equal(t, "BAD_USER_INPUT", r.Code(t), field)
		require.Equal(t, field, r.Errors[0].Extensions["field"])
	}
	require.Equal(t, "BAD_USER_INPUT", s.CreateSession(t, "demo-key", NewKey(), SessionInput(100, "expiresInSeconds", 0)).Code(t))

	// The database holds the secret's hash, nowhere the secret.
	hash := sha256.Sum256([]byte(secret))
	require.Equal(t, 1, CountRows(t, pool, "SELECT count(*)::int FROM checkout_sessions WHERE client_secret_hash = $1", hash[:]))
	require.Zero(t, CountRows(t, pool, "SELECT count(*)::int FROM checkout_sessions s WHERE s::text LIKE '%' || $1 || '%'", secret[len(secret)-20:]))

	// Paying, reading and refusing never log it.
	s.PaySession(t, NewKey(), secret, "pm_card_chargeDeclined", nil)
	s.PaySession(t, NewKey(), secret, "pm_card_visa", map[string]any{"amount": 1})
	s.PaySession(t, NewKey(), secret, "pm_card_visa", nil)
	s.SessionStatus(t, PublishableKey, NewKey(), &secret)
	logs := s.LogText()
	require.Contains(t, logs, "checkout session created", "the log speaks of the session")
	require.NotContains(t, logs, secret)
	require.NotContains(t, logs, secret[len(secret)-43:], "nor its secret part")
}

func TestPublishableKey_Declines_AreRationedPerKeyAndAddress(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, map[string]string{"RATE_LIMIT_DECLINES_IP": "0.001", "RATE_LIMIT_DECLINES_IP_BURST": "3", "SESSION_MAX_ATTEMPTS": "20"})
	_, secret := s.OpenSession(t, SessionInput(900))
	for i := range 3 {
		require.Equal(t, "FAILED", s.PaySession(t, NewKey(), secret, "pm_card_chargeDeclined", nil).Data.ChargeCard.Status, "decline %d", i)
	}
	key := NewKey()
	res, err := s.API(PublishableKey).ChargeCardRaw(context.Background(), key, map[string]any{"paymentMethod": "pm_card_visa", "checkoutSession": secret})
	r, err := Answered(res, err, "chargeCard")
	require.NoError(t, err)
	require.Equal(t, "RATE_LIMITED", r.Code(t))
	require.Zero(t, AttemptsOf(t, pool, key), "nothing was run")
	m := metricstest.Scrape(t, s.Client, s.URL+"/metrics")
	require.Equal(t, 3.0, m.Value("chargeonce_publishable_declines_total", "scope", "ip"))
	require.Equal(t, 3.0, m.Value("chargeonce_publishable_declines_total", "scope", "key"))
	require.Equal(t, 1.0, m.Value("chargeonce_rate_limited_total", "scope", "declines_ip"))
	// The merchant's server is not rationed by its shoppers' declines.
	require.Equal(t, "SUCCEEDED", s.ChargeCardRaw(t, "demo-key", NewKey(), map[string]any{"paymentMethod": "pm_card_visa", "checkoutSession": secret}).Data.ChargeCard.Status)
}

func TestCheckoutSession_Events_GoThroughTheOutboxTheStreamAndTheWebhook(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	var mu sync.Mutex
	received := map[string]map[string]any{} // by event type
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e map[string]any
		if json.NewDecoder(r.Body).Decode(&e) == nil {
			mu.Lock()
			received[e["type"].(string)] = e
			mu.Unlock()
		}
	}))
	t.Cleanup(receiver.Close)
	// A broker of its own: the shared one's durable webhook consumer is
	// shared by every test's server, which would take this test's events.
	s := StartOn(t, dbURL, map[string]string{"CLEANUP_INTERVAL": "200ms", "NATS_URL": eventstest.New(t).URL()})
	_, _, err := webhook.NewEndpoints(pool, webhook.Config{}).Set(context.Background(), "demo", receiver.URL+"/hooks")
	require.NoError(t, err)

	sess, secret := s.OpenSession(t, SessionInput(3300, "orderId", "order-e"))
	unpaid, _ := s.OpenSession(t, SessionInput(100, "expiresInSeconds", 1))
	key := NewKey()
	paid := s.PaySession(t, key, secret, "pm_card_visa", nil).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", paid.Status)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, []string{"charge.succeeded", "checkout_session.expired", "checkout_session.paid"}, dbtest.Query[string](c, pool,
			"SELECT type FROM charge_events WHERE sent_at IS NOT NULL ORDER BY type"), "every event, each published to the stream by the relay")
		mu.Lock()
		defer mu.Unlock()
		require.Len(c, received, 3, "and delivered to the merchant's webhook")
	}, 15*time.Second, 50*time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	paidEvent, expiredEvent := received["checkout_session.paid"], received["checkout_session.expired"]
	require.NotEqual(t, received["charge.succeeded"]["id"], paidEvent["id"], "each event has its own id")
	require.Equal(t, sess.ID, paidEvent["checkoutSession"].(map[string]any)["id"])
	require.Equal(t, "PAID", paidEvent["checkoutSession"].(map[string]any)["status"])
	require.Equal(t, paid.Charge.Id, paidEvent["charge"].(map[string]any)["id"])
	require.Equal(t, key, paidEvent["idempotencyKey"], "the key that paid")
	require.Equal(t, "3300", fmt.Sprint(paidEvent["amount"]))
	require.Equal(t, "order-e", paidEvent["orderId"])
	require.Equal(t, unpaid.ID, expiredEvent["checkoutSession"].(map[string]any)["id"])
	require.Equal(t, "EXPIRED", expiredEvent["checkoutSession"].(map[string]any)["status"])
	require.NotContains(t, expiredEvent, "charge")
	require.NotContains(t, expiredEvent, "attemptId")
}

func TestCheckoutSession_StreamsFromARegisteredOrigin(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := ListenOn(t, dbURL, nil)
	const shop = "http://127.0.0.1:5173"
	_, _, err := merchant.New(dbtest.Open(t, dbURL), false).AddOrigin(context.Background(), "demo", shop)
	require.NoError(t, err)
	_, secret := s.OpenSession(t, SessionInput(600))
	key := NewKey()
	require.Equal(t, "SUCCEEDED", s.PaySession(t, key, secret, "pm_card_visa", nil).Data.ChargeCard.Status)
	vars := map[string]any{"key": key, "session": secret}

	// A websocket from the registered origin, the publishable key in
	// connection_init, as a browser opens it.
	ws := graphtest.DialWS(t, s.URL, http.Header{"Origin": {shop}})
	ack, err := ws.Init(t, map[string]any{"authorization": "Bearer " + PublishableKey})
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	ws.Subscribe(t, "1", SessionUpdatesSubscription, vars)
	require.Equal(t, "SUCCEEDED", ws.Next(t, "1").Result.Status)

	// The secret key on a socket from that origin is closed at its init.
	secretWS := graphtest.DialWS(t, s.URL, http.Header{"Origin": {shop}})
	_, err = secretWS.Init(t, map[string]any{"authorization": "Bearer demo-key"})
	require.Error(t, err)
	require.Equal(t, 4403, int(graphtest.CloseStatus(err)))

	// An event stream from that origin carries its CORS header.
	resp, _ := graphtest.PostSSE(t, s.Client, s.URL, map[string]string{"Authorization": "Bearer " + PublishableKey, "Origin": shop},
		SessionUpdatesSubscription, vars)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, shop, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "SUCCEEDED", graphtest.NewSSE(resp).MustNext(t).Result.Status)

	// A socket from an origin nobody registered does not open.
	ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
	defer cancel()
	_, dial, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Origin": {"https://evil.example"}},
	})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, dial.StatusCode)
}

// TestDemoShopBackend_CreatesTheCartsSession: the demo's development shop
// backend answers one session per cart (the same on a retry), refuses the
// cart with other terms and a malformed request with the API's codes, and
// does not exist in production.
func TestDemoShopBackend_CreatesTheCartsSession(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := StartOn(t, dbURL, nil)
	shop := func(body string) (int, map[string]any) {
		r := s.Send(t, http.MethodPost, "/demo/checkout-session", JSONHeaders(), strings.NewReader(body))
		var v map[string]any
		require.NoError(t, json.Unmarshal(r.Body, &v), "%s", r.Body)
		return r.Status, v
	}
	status, first := shop(`{"cartId":"cart-1","amount":1999,"currency":"USD"}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, PublishableKey, first["publishableKey"])
	require.Equal(t, false, first["replayed"])
	secret, _ := first["clientSecret"].(string)
	require.True(t, strings.HasPrefix(secret, "cs_"), "%v", first)
	status, again := shop(`{"cartId":"cart-1","amount":1999,"currency":"USD"}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, again["replayed"])
	require.Equal(t, secret, again["clientSecret"], "the same cart, the same session and secret")
	require.Equal(t, "SUCCEEDED", s.PaySession(t, NewKey(), secret, "pm_card_visa", nil).Data.ChargeCard.Status)

	for body, want := range map[string]struct {
		status int
		code   string
	}{
		`{"cartId":"cart-1","amount":2000,"currency":"USD"}`:             {http.StatusConflict, "IDEMPOTENCY_KEY_REUSED"},
		`{"cartId":"cart-2","amount":0,"currency":"USD"}`:                {http.StatusBadRequest, "BAD_USER_INPUT"},
		`{"cartId":"","amount":100,"currency":"USD"}`:                    {http.StatusBadRequest, "BAD_USER_INPUT"},
		`{"cartId":"cart-3","amount":100,"currency":"USD","secret":"x"}`: {http.StatusBadRequest, "BAD_USER_INPUT"},
		`not json`: {http.StatusBadRequest, "BAD_USER_INPUT"},
	} {
		status, v := shop(body)
		require.Equal(t, want.status, status, body)
		require.Equal(t, want.code, v["error"].(map[string]any)["code"], body)
	}

	prod := StartOn(t, dbURL, stripefake.Start(t).Env(map[string]string{"APP_ENV": "production"}))
	require.Equal(t, http.StatusNotFound, prod.Send(t, http.MethodPost, "/demo/checkout-session", JSONHeaders(),
		strings.NewReader(`{"cartId":"cart-9","amount":100,"currency":"USD"}`)).Status)
}
