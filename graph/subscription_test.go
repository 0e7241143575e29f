package graph_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/graph/graphtest"
	"chargeonce/merchant"
	"chargeonce/metrics/metricstest"
)

// The live status of a charge (the chargeUpdated subscription), through the
// real server: over a websocket (graphql-transport-ws) and over server-sent
// events, across instances on one database.

func TestChargeUpdated_FinalizedOnAnotherInstance_ReachesWebsocketAndSSE(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Instance A serves the subscribers. It neither reconciles nor polls
	// within the test: what reaches them comes from B, through PostgreSQL's
	// NOTIFY and A's LISTEN.
	a := apitest.ListenOn(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h", "LIVE_POLL_INTERVAL": "1h"})
	b := apitest.StartOn(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h"})
	key, input := apitest.ProcessingAttempt(t, a)

	ws := graphtest.SubscribeWS(t, a.URL, "demo-key", key)
	first := ws.Next(t, "1")
	require.Empty(t, first.Errors)
	require.Equal(t, "PROCESSING", first.Result.Status, "the current state at once")
	require.Equal(t, key, first.Result.IdempotencyKey)
	require.NotNil(t, first.Result.RetryAfterMs)
	sse := graphtest.SubscribeSSE(t, a.Client, a.URL, "demo-key", key)
	require.Equal(t, "PROCESSING", sse.MustNext(t).Result.Status)
	require.Equal(t, 2.0, apitest.SubscriptionsOpen(t, a))

	// B finalizes: a retry with the same key takes the stuck attempt over
	// and records the charge the provider made.
	retry := b.ChargeCard(t, "demo-key", key, input).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", retry.Status)

	for name, next := range map[string]func() graphtest.Message{
		"websocket": func() graphtest.Message { return ws.Next(t, "1") },
		"sse":       func() graphtest.Message { return sse.MustNext(t) },
	} {
		final := next()
		require.Empty(t, final.Errors, name)
		require.Equal(t, "SUCCEEDED", final.Result.Status, name)
		require.Equal(t, retry.Charge.Id, final.Result.Charge.Id, name)
		require.Equal(t, retry.Charge.ProviderChargeId, final.Result.Charge.ProviderChargeId, name)
		require.True(t, next().Complete, "%s: complete after the final state", name)
	}
	_, err := sse.Next(t)
	require.ErrorIs(t, err, io.EOF, "the event stream ends")
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, 0.0, apitest.SubscriptionsOpen(c, a)) }, graphtest.Within, 20*time.Millisecond)
	require.Len(t, a.ProviderCharges(t, "demo", key), 1)
	require.Contains(t, a.LogText(), "field=chargeUpdated", "the access log names what the stream ran")
}

func TestChargeUpdated_AlreadyFinal_OneMessageThenComplete(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.ListenOn(t, dbURL, nil)
	paid, declined := apitest.NewKey(), apitest.NewKey()
	require.Equal(t, "SUCCEEDED", s.ChargeCard(t, "demo-key", paid, apitest.Visa(700)).Data.ChargeCard.Status)
	require.Equal(t, "FAILED", s.ChargeCard(t, "demo-key", declined, apitest.WithPaymentMethod("pm_card_chargeDeclined")).Data.ChargeCard.Status)

	ws := graphtest.SubscribeWS(t, s.URL, "demo-key", paid)
	m := ws.Next(t, "1")
	require.Equal(t, "SUCCEEDED", m.Result.Status)
	require.True(t, m.Result.Replayed, "as chargeStatus answers")
	require.True(t, ws.Next(t, "1").Complete)
	// The same socket carries the next subscription.
	ws.Subscribe(t, "2", apitest.ChargeUpdatedSubscription, map[string]any{"key": declined})
	m = ws.Next(t, "2")
	require.Equal(t, "FAILED", m.Result.Status)
	require.Equal(t, "card_declined", m.Result.Failure.Code)
	require.True(t, ws.Next(t, "2").Complete)

	sse := graphtest.SubscribeSSE(t, s.Client, s.URL, "demo-key", paid)
	require.Equal(t, "SUCCEEDED", sse.MustNext(t).Result.Status)
	require.True(t, sse.MustNext(t).Complete)
}

func TestChargeUpdated_AnotherMerchantsKey_IsNotFoundLikeAnUnknownKey(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.ListenOn(t, dbURL, nil)
	_, acmeKey, err := merchant.New(dbtest.Open(t, dbURL), false).CreateAPIKey(context.Background(), "acme", merchant.KeySecret)
	require.NoError(t, err)
	demoKey := apitest.NewKey()
	require.Equal(t, "SUCCEEDED", s.ChargeCard(t, "demo-key", demoKey, apitest.Visa(4200)).Data.ChargeCard.Status)
	pending, _ := apitest.ProcessingAttempt(t, s)

	answers := map[string]graphtest.Message{}
	for name, key := range map[string]string{"demo's final key": demoKey, "demo's open key": pending, "unknown key": apitest.NewKey()} {
		ws := graphtest.SubscribeWS(t, s.URL, acmeKey, key)
		m := ws.Next(t, "1")
		require.Nil(t, m.Result, "%s: no data of another merchant", name)
		require.Equal(t, "NOT_FOUND", m.Code(t), name)
		require.True(t, ws.Next(t, "1").Complete, name)

		sse := graphtest.SubscribeSSE(t, s.Client, s.URL, acmeKey, key)
		e := sse.MustNext(t)
		require.Nil(t, e.Result, name)
		require.Equal(t, "NOT_FOUND", e.Code(t), name)
		require.Equal(t, m.Errors[0].Message, e.Errors[0].Message, name)
		require.True(t, sse.MustNext(t).Complete, name)
		answers[name] = m
	}
	require.Equal(t, answers["unknown key"].Errors, answers["demo's final key"].Errors, "the same answer as for a key nobody used")
	require.Equal(t, answers["unknown key"].Errors, answers["demo's open key"].Errors)
	require.Equal(t, 0.0, apitest.SubscriptionsOpen(t, s))
}

func TestChargeUpdated_WithoutAValidKey_IsRefusedOnBothTransports(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.ListenOn(t, dbURL, nil)
	key, _ := apitest.ProcessingAttempt(t, s)

	// Websocket: the key in connection_init (or the upgrade's header) is
	// checked, and a refusal closes the socket with 4403.
	for name, tc := range map[string]struct {
		header http.Header
		init   map[string]any
	}{
		"no key":                       {nil, map[string]any{}},
		"unknown key in init":          {nil, map[string]any{"authorization": "Bearer not-a-key"}},
		"not a bearer key in init":     {nil, map[string]any{"authorization": "demo-key"}},
		"unknown key in the header":    {http.Header{"Authorization": {"Bearer not-a-key"}}, map[string]any{"authorization": "Bearer demo-key"}},
		"malformed header":             {http.Header{"Authorization": {"Basic ZGVtbw=="}}, map[string]any{}},
		"init payload is not a bearer": {nil, map[string]any{"Authorization": 42}},
	} {
		c := graphtest.DialWS(t, s.URL, tc.header)
		_, err := c.Init(t, tc.init)
		require.Error(t, err, name)
		require.Equal(t, websocket.StatusCode(4403), graphtest.CloseStatus(err), "%s: %v", name, err)
	}
	// A good key in the header needs none in connection_init.
	c := graphtest.DialWS(t, s.URL, http.Header{"Authorization": {"Bearer demo-key"}})
	ack, err := c.Init(t, nil)
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	c.Subscribe(t, "1", apitest.ChargeUpdatedSubscription, map[string]any{"key": key})
	require.Equal(t, "PROCESSING", c.Next(t, "1").Result.Status)

	// Server-sent events: 401 before the stream starts, in the usual shape.
	for name, headers := range map[string]map[string]string{
		"no key":           nil,
		"unknown key":      apitest.Bearer("not-a-key"),
		"malformed header": {"Authorization": "Basic ZGVtbw=="},
	} {
		resp, _ := graphtest.PostSSE(t, s.Client, s.URL, headers, apitest.ChargeUpdatedSubscription, map[string]any{"key": key})
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", name, body)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), name)
		require.Equal(t, "Bearer", resp.Header.Get("WWW-Authenticate"), name)
		require.Equal(t, "UNAUTHENTICATED", apitest.RawResponse{Body: body}.GQL(t).Code(t), name)
	}
	require.Contains(t, s.LogText(), "no API key in connection_init")
}

func TestChargeUpdated_FailedAuthentications_CountAgainstTheAddress(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Five tokens a client address may spend, and hardly one back: its two
	// websocket upgrades without a key spend one each, and so do its three
	// failed keys.
	s := apitest.ListenOn(t, dbURL, map[string]string{"RATE_LIMIT_IP": "0.001", "RATE_LIMIT_IP_BURST": "5"})
	before := metricstest.Scrape(t, s.Client, s.URL+"/metrics")

	c := graphtest.DialWS(t, s.URL, nil)
	_, err := c.Init(t, map[string]any{"authorization": "Bearer not-a-key"})
	require.Equal(t, websocket.StatusCode(4403), graphtest.CloseStatus(err))
	c = graphtest.DialWS(t, s.URL, nil)
	_, err = c.Init(t, map[string]any{})
	require.Equal(t, websocket.StatusCode(4403), graphtest.CloseStatus(err))
	resp, _ := graphtest.PostSSE(t, s.Client, s.URL, apitest.Bearer("not-a-key"), apitest.ChargeUpdatedSubscription, map[string]any{"key": apitest.NewKey()})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// The address has used its failures: even a good key is not looked up
	// now, on either transport, nor over POST.
	ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
	defer cancel()
	_, refused, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Authorization": {"Bearer demo-key"}},
	})
	require.Error(t, err)
	require.Equal(t, http.StatusTooManyRequests, refused.StatusCode)
	body, _ := io.ReadAll(refused.Body)
	require.Equal(t, "RATE_LIMITED", apitest.RawResponse{Body: body}.GQL(t).Code(t))
	resp, _ = graphtest.PostSSE(t, s.Client, s.URL, apitest.Bearer("demo-key"), apitest.ChargeUpdatedSubscription, map[string]any{"key": apitest.NewKey()})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "RATE_LIMITED", s.ChargeStatus(t, "demo-key", apitest.NewKey()).Code(t))

	after := metricstest.Scrape(t, s.Client, s.URL+"/metrics")
	apitest.RequireDeltas(t, before, after, []apitest.MetricDelta{
		{Name: "chargeonce_unauthenticated_requests_total", Want: 3},
		{Name: "chargeonce_rate_limited_total", Labels: []string{"scope", "ip"}, Want: 3},
	})
}

func TestChargeUpdated_StreamsCarrySubscriptionsOnly(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.ListenOn(t, dbURL, nil)
	key := apitest.NewKey()
	vars := map[string]any{"key": key, "input": apitest.Visa(100)}

	// A charge goes over POST only: over a websocket or an event stream it
	// is refused, and nothing is charged.
	c := graphtest.DialWS(t, s.URL, nil)
	ack, err := c.Init(t, map[string]any{"authorization": "Bearer demo-key"})
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	c.Subscribe(t, "1", apitest.ChargeCardMutation, vars)
	m := c.Next(t, "1")
	require.Equal(t, "BAD_REQUEST", m.Code(t))
	require.Contains(t, m.Errors[0].Message, "POST")
	require.True(t, c.Next(t, "1").Complete)
	c.Subscribe(t, "2", apitest.ChargeStatusQuery, map[string]any{"key": key})
	require.Equal(t, "BAD_REQUEST", c.Next(t, "2").Code(t), "queries too")
	require.True(t, c.Next(t, "2").Complete)

	resp, _ := graphtest.PostSSE(t, s.Client, s.URL, apitest.Bearer("demo-key"), apitest.ChargeCardMutation, vars)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sse := graphtest.NewSSE(resp)
	require.Equal(t, "BAD_REQUEST", sse.MustNext(t).Code(t))
	require.True(t, sse.MustNext(t).Complete)

	// And the subscription needs a stream: POST answers one message, not a stream.
	require.Equal(t, "BAD_REQUEST", s.Do(t, apitest.Bearer("demo-key"), apitest.ChargeUpdatedSubscription, map[string]any{"key": key}).Code(t))
	require.Empty(t, s.ProviderCharges(t, "demo", key))
	require.Nil(t, s.ChargeStatus(t, "demo-key", key).Data.ChargeStatus, "nothing was claimed")

	// A client that lists the event stream beside JSON on every request
	// (urql does) gets JSON: a charge is never taken for a stream.
	urqlAccept := apitest.JSONHeaders("Authorization", "Bearer demo-key",
		"Accept", "application/graphql-response+json, application/graphql+json, application/json, text/event-stream, multipart/mixed")
	charged := s.Send(t, http.MethodPost, "/graphql", urqlAccept, strings.NewReader(apitest.ChargeBody(apitest.NewKey(), `{"amount":100,"currency":"USD","paymentMethod":"pm_card_visa"}`)))
	require.Equal(t, "application/json", charged.Header.Get("Content-Type"))
	require.Equal(t, "SUCCEEDED", charged.GQL(t).Data.ChargeCard.Status)
}

func TestChargeUpdated_ClientGoesAway_WatcherIsCleanedUp(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.ListenOn(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h"})
	key, _ := apitest.ProcessingAttempt(t, s)
	require.Equal(t, 0.0, apitest.SubscriptionsOpen(t, s))

	ws := graphtest.SubscribeWS(t, s.URL, "demo-key", key)
	require.Equal(t, "PROCESSING", ws.Next(t, "1").Result.Status)
	sse := graphtest.SubscribeSSE(t, s.Client, s.URL, "demo-key", key)
	require.Equal(t, "PROCESSING", sse.MustNext(t).Result.Status)
	require.Equal(t, 2.0, apitest.SubscriptionsOpen(t, s))

	_ = ws.CloseNow() // gone, without a word
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, 1.0, apitest.SubscriptionsOpen(c, s)) }, graphtest.Within, 20*time.Millisecond)
	sse.Cancel()
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, 0.0, apitest.SubscriptionsOpen(c, s)) }, graphtest.Within, 20*time.Millisecond)

	// A client that says it is done (complete) ends its watcher too.
	ws = graphtest.SubscribeWS(t, s.URL, "demo-key", key)
	require.Equal(t, "PROCESSING", ws.Next(t, "1").Result.Status)
	require.Equal(t, 1.0, apitest.SubscriptionsOpen(t, s))
	ws.Send(t, graphtest.Frame{Type: "complete", ID: "1"})
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, 0.0, apitest.SubscriptionsOpen(c, s)) }, graphtest.Within, 20*time.Millisecond)
}
