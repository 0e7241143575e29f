package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/merchant"
)

// The live status of a charge (the chargeUpdated subscription), through the
// real server: over a websocket (graphql-transport-ws) and over server-sent
// events, across instances on one database.

// liveWithin bounds every wait for a subscription: generous, the machine is noisy.
const liveWithin = 30 * time.Second

const chargeUpdatedSubscription = `subscription Live($key: String!) { chargeUpdated(idempotencyKey: $key) { ` + payloadFields + ` } }`

// liveMessage is one thing a subscription said: a state, errors, or its end.
type liveMessage struct {
	payload  *apiclient.ChargeResult
	errors   gqlerror.List
	complete bool
}

// code is the extensions.code of the message's only error.
func (m liveMessage) code(t *testing.T) string {
	t.Helper()
	require.Len(t, m.errors, 1, "want exactly one error")
	code, _ := m.errors[0].Extensions["code"].(string)
	return code
}

// liveResponse decodes a GraphQL response of the subscription.
func liveResponse(t *testing.T, b []byte) liveMessage {
	t.Helper()
	var r struct {
		Data *struct {
			ChargeUpdated *apiclient.ChargeResult `json:"chargeUpdated"`
		} `json:"data"`
		Errors gqlerror.List `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(b, &r), "not a GraphQL response: %s", b)
	m := liveMessage{errors: r.Errors}
	if r.Data != nil {
		m.payload = r.Data.ChargeUpdated
	}
	return m
}

// wsURL is the server's /graphql as a websocket URL.
func (s *testServer) wsURL() string { return "ws" + strings.TrimPrefix(s.URL, "http") + "/graphql" }

// wsClient speaks graphql-transport-ws to a server.
type wsClient struct {
	conn *websocket.Conn
}

type wsMessage struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// dialWS opens a websocket to s with the graphql-transport-ws subprotocol
// and the given headers; the test closes it at its end.
func dialWS(t *testing.T, s *testServer, header http.Header) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveWithin)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: header,
	})
	require.NoError(t, err)
	require.Equal(t, "graphql-transport-ws", conn.Subprotocol())
	t.Cleanup(func() { _ = conn.CloseNow() })
	return &wsClient{conn: conn}
}

func (c *wsClient) send(t *testing.T, m wsMessage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveWithin)
	defer cancel()
	require.NoError(t, wsjson.Write(ctx, c.conn, m))
}

// read returns the next message that is not a ping (which it answers), or
// the error that ended the connection; it fails the test after liveWithin.
// (A read's context does not cut a read that waits for a frame: closing the
// connection does.)
func (c *wsClient) read(t *testing.T) (wsMessage, error) {
	t.Helper()
	type result struct {
		m   wsMessage
		err error
	}
	// One deadline for the call: the server's pings must not keep it waiting.
	deadline := time.After(liveWithin)
	for {
		got := make(chan result, 1)
		go func() {
			var m wsMessage
			err := wsjson.Read(context.Background(), c.conn, &m)
			got <- result{m, err}
		}()
		var r result
		select {
		case r = <-got:
		case <-deadline:
			_ = c.conn.CloseNow()
			t.Fatalf("no websocket message within %s", liveWithin)
		}
		if r.err != nil {
			return wsMessage{}, r.err
		}
		if r.m.Type == "ping" {
			c.send(t, wsMessage{Type: "pong"})
			continue
		}
		return r.m, nil
	}
}

// init sends connection_init with payload and returns the server's answer.
func (c *wsClient) init(t *testing.T, payload map[string]any) (wsMessage, error) {
	t.Helper()
	raw, err := json.Marshal(payload)
	require.NoError(t, err)
	c.send(t, wsMessage{Type: "connection_init", Payload: raw})
	return c.read(t)
}

// subscribe starts an operation under id.
func (c *wsClient) subscribe(t *testing.T, id, query string, vars map[string]any) {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	c.send(t, wsMessage{Type: "subscribe", ID: id, Payload: raw})
}

// next is the next message of operation id.
func (c *wsClient) next(t *testing.T, id string) liveMessage {
	t.Helper()
	m, err := c.read(t)
	require.NoError(t, err)
	require.Equal(t, id, m.ID, "%+v", m)
	switch m.Type {
	case "next":
		return liveResponse(t, m.Payload)
	case "complete":
		return liveMessage{complete: true}
	case "error":
		var errs gqlerror.List
		require.NoError(t, json.Unmarshal(m.Payload, &errs))
		return liveMessage{errors: errs}
	}
	t.Fatalf("unexpected message %+v", m)
	return liveMessage{}
}

// liveWS connects to s with apiKey in connection_init and subscribes to key.
func liveWS(t *testing.T, s *testServer, apiKey, key string) *wsClient {
	t.Helper()
	c := dialWS(t, s, nil)
	ack, err := c.init(t, map[string]any{"authorization": "Bearer " + apiKey})
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	c.subscribe(t, "1", chargeUpdatedSubscription, map[string]any{"key": key})
	return c
}

// closeStatus is the close code a connection ended with, -1 when none.
func closeStatus(err error) websocket.StatusCode { return websocket.CloseStatus(err) }

// sseStream is a subscription over server-sent events.
type sseStream struct {
	resp   *http.Response
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

// postSSE posts a GraphQL operation with Accept: text/event-stream.
func postSSE(t *testing.T, s *testServer, headers map[string]string, query string, vars map[string]any) (*http.Response, context.CancelFunc) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{Transport: s.client.Transport} // no overall timeout: the stream lasts
	resp, err := client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp, cancel
}

// liveSSE subscribes to key over server-sent events with apiKey.
func liveSSE(t *testing.T, s *testServer, apiKey, key string) *sseStream {
	t.Helper()
	resp, cancel := postSSE(t, s, bearer(apiKey), chargeUpdatedSubscription, map[string]any{"key": key})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return &sseStream{resp: resp, lines: bufio.NewScanner(resp.Body), cancel: cancel}
}

// next reads the next event (comments, the keep-alives, are skipped); the
// stream's end without a complete event is io.EOF.
func (s *sseStream) next(t *testing.T) (liveMessage, error) {
	t.Helper()
	got := make(chan struct {
		m   liveMessage
		err error
	}, 1)
	go func() {
		var event, data string
		for s.lines.Scan() {
			line := s.lines.Text()
			switch {
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data += strings.TrimPrefix(line, "data: ")
			case line == "" && event != "":
				if event == "complete" {
					got <- struct {
						m   liveMessage
						err error
					}{m: liveMessage{complete: true}}
					return
				}
				var r struct {
					Data *struct {
						ChargeUpdated *apiclient.ChargeResult `json:"chargeUpdated"`
					} `json:"data"`
					Errors gqlerror.List `json:"errors"`
				}
				err := json.Unmarshal([]byte(data), &r)
				m := liveMessage{errors: r.Errors}
				if r.Data != nil {
					m.payload = r.Data.ChargeUpdated
				}
				got <- struct {
					m   liveMessage
					err error
				}{m: m, err: err}
				return
			}
		}
		err := s.lines.Err()
		if err == nil {
			err = io.EOF
		}
		got <- struct {
			m   liveMessage
			err error
		}{err: err}
	}()
	select {
	case r := <-got:
		return r.m, r.err
	case <-time.After(liveWithin):
		t.Fatalf("no event within %s", liveWithin)
		return liveMessage{}, nil
	}
}

func (s *sseStream) mustNext(t *testing.T) liveMessage {
	t.Helper()
	m, err := s.next(t)
	require.NoError(t, err)
	return m
}

// processingAttempt leaves an attempt of the demo merchant PROCESSING with
// nobody holding it: the provider charged and lost its answer, and the
// request handed the attempt on. Only a reconciler or a retry finalizes it.
func processingAttempt(t *testing.T, s *testServer) (string, apiclient.ChargeCardInput) {
	t.Helper()
	key, input := newKey(), withPaymentMethod("pm_card_lostResponse")
	r := s.chargeCard(t, "demo-key", key, input)
	require.Empty(t, r.Errors)
	require.Equal(t, "PROCESSING", r.Data.ChargeCard.Status)
	return key, input
}

// subscriptionsOpen reads the gauge of open subscriptions from s's /metrics.
func subscriptionsOpen(t require.TestingT, s *testServer) float64 {
	helper(t)
	return scrape(t, s.client, s.URL+"/metrics").value("chargeonce_subscriptions_open")
}

func TestChargeUpdated_FinalizedOnAnotherInstance_ReachesWebsocketAndSSE(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Instance A serves the subscribers. It neither reconciles nor polls
	// within the test: what reaches them comes from B, through PostgreSQL's
	// NOTIFY and A's LISTEN.
	a := startListening(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h", "LIVE_POLL_INTERVAL": "1h"})
	b := startServer(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h"})
	key, input := processingAttempt(t, a)

	ws := liveWS(t, a, "demo-key", key)
	first := ws.next(t, "1")
	require.Empty(t, first.errors)
	require.Equal(t, "PROCESSING", first.payload.Status, "the current state at once")
	require.Equal(t, key, first.payload.IdempotencyKey)
	require.NotNil(t, first.payload.RetryAfterMs)
	sse := liveSSE(t, a, "demo-key", key)
	require.Equal(t, "PROCESSING", sse.mustNext(t).payload.Status)
	require.Equal(t, 2.0, subscriptionsOpen(t, a))

	// B finalizes: a retry with the same key takes the stuck attempt over
	// and records the charge the provider made.
	retry := b.chargeCard(t, "demo-key", key, input).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", retry.Status)

	for name, next := range map[string]func() liveMessage{
		"websocket": func() liveMessage { return ws.next(t, "1") },
		"sse":       func() liveMessage { return sse.mustNext(t) },
	} {
		final := next()
		require.Empty(t, final.errors, name)
		require.Equal(t, "SUCCEEDED", final.payload.Status, name)
		require.Equal(t, retry.Charge.Id, final.payload.Charge.Id, name)
		require.Equal(t, retry.Charge.ProviderChargeId, final.payload.Charge.ProviderChargeId, name)
		require.True(t, next().complete, "%s: complete after the final state", name)
	}
	_, err := sse.next(t)
	require.ErrorIs(t, err, io.EOF, "the event stream ends")
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, 0.0, subscriptionsOpen(c, a)) }, liveWithin, 20*time.Millisecond)
	require.Len(t, a.providerCharges(t, "demo", key), 1)
	require.Contains(t, a.logText(), "field=chargeUpdated", "the access log names what the stream ran")
}

func TestChargeUpdated_AlreadyFinal_OneMessageThenComplete(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startListening(t, dbURL, nil)
	paid, declined := newKey(), newKey()
	require.Equal(t, "SUCCEEDED", s.chargeCard(t, "demo-key", paid, visa(700)).Data.ChargeCard.Status)
	require.Equal(t, "FAILED", s.chargeCard(t, "demo-key", declined, withPaymentMethod("pm_card_chargeDeclined")).Data.ChargeCard.Status)

	ws := liveWS(t, s, "demo-key", paid)
	m := ws.next(t, "1")
	require.Equal(t, "SUCCEEDED", m.payload.Status)
	require.True(t, m.payload.Replayed, "as chargeStatus answers")
	require.True(t, ws.next(t, "1").complete)
	// The same socket carries the next subscription.
	ws.subscribe(t, "2", chargeUpdatedSubscription, map[string]any{"key": declined})
	m = ws.next(t, "2")
	require.Equal(t, "FAILED", m.payload.Status)
	require.Equal(t, "card_declined", m.payload.Failure.Code)
	require.True(t, ws.next(t, "2").complete)

	sse := liveSSE(t, s, "demo-key", paid)
	require.Equal(t, "SUCCEEDED", sse.mustNext(t).payload.Status)
	require.True(t, sse.mustNext(t).complete)
}

func TestChargeUpdated_AnotherMerchantsKey_IsNotFoundLikeAnUnknownKey(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startListening(t, dbURL, nil)
	_, acmeKey, err := merchant.New(openPool(t, dbURL), false).CreateAPIKey(context.Background(), "acme")
	require.NoError(t, err)
	demoKey := newKey()
	require.Equal(t, "SUCCEEDED", s.chargeCard(t, "demo-key", demoKey, visa(4200)).Data.ChargeCard.Status)
	pending, _ := processingAttempt(t, s)

	answers := map[string]liveMessage{}
	for name, key := range map[string]string{"demo's final key": demoKey, "demo's open key": pending, "unknown key": newKey()} {
		ws := liveWS(t, s, acmeKey, key)
		m := ws.next(t, "1")
		require.Nil(t, m.payload, "%s: no data of another merchant", name)
		require.Equal(t, "NOT_FOUND", m.code(t), name)
		require.True(t, ws.next(t, "1").complete, name)

		sse := liveSSE(t, s, acmeKey, key)
		e := sse.mustNext(t)
		require.Nil(t, e.payload, name)
		require.Equal(t, "NOT_FOUND", e.code(t), name)
		require.Equal(t, m.errors[0].Message, e.errors[0].Message, name)
		require.True(t, sse.mustNext(t).complete, name)
		answers[name] = m
	}
	require.Equal(t, answers["unknown key"].errors, answers["demo's final key"].errors, "the same answer as for a key nobody used")
	require.Equal(t, answers["unknown key"].errors, answers["demo's open key"].errors)
	require.Equal(t, 0.0, subscriptionsOpen(t, s))
}

func TestChargeUpdated_WithoutAValidKey_IsRefusedOnBothTransports(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startListening(t, dbURL, nil)
	key, _ := processingAttempt(t, s)

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
		c := dialWS(t, s, tc.header)
		_, err := c.init(t, tc.init)
		require.Error(t, err, name)
		require.Equal(t, websocket.StatusCode(4403), closeStatus(err), "%s: %v", name, err)
	}
	// A good key in the header needs none in connection_init.
	c := dialWS(t, s, http.Header{"Authorization": {"Bearer demo-key"}})
	ack, err := c.init(t, nil)
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	c.subscribe(t, "1", chargeUpdatedSubscription, map[string]any{"key": key})
	require.Equal(t, "PROCESSING", c.next(t, "1").payload.Status)

	// Server-sent events: 401 before the stream starts, in the usual shape.
	for name, headers := range map[string]map[string]string{
		"no key":           nil,
		"unknown key":      bearer("not-a-key"),
		"malformed header": {"Authorization": "Basic ZGVtbw=="},
	} {
		resp, _ := postSSE(t, s, headers, chargeUpdatedSubscription, map[string]any{"key": key})
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", name, body)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), name)
		require.Equal(t, "Bearer", resp.Header.Get("WWW-Authenticate"), name)
		require.Equal(t, "UNAUTHENTICATED", rawResponse{body: body}.gql(t).code(t), name)
	}
	require.Contains(t, s.logText(), "no API key in connection_init")
}

func TestChargeUpdated_FailedAuthentications_CountAgainstTheAddress(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Three failures a client address may make, and hardly a token back.
	s := startListening(t, dbURL, map[string]string{"RATE_LIMIT_IP": "0.001", "RATE_LIMIT_IP_BURST": "3"})
	before := scrape(t, s.client, s.URL+"/metrics")

	c := dialWS(t, s, nil)
	_, err := c.init(t, map[string]any{"authorization": "Bearer not-a-key"})
	require.Equal(t, websocket.StatusCode(4403), closeStatus(err))
	c = dialWS(t, s, nil)
	_, err = c.init(t, map[string]any{})
	require.Equal(t, websocket.StatusCode(4403), closeStatus(err))
	resp, _ := postSSE(t, s, bearer("not-a-key"), chargeUpdatedSubscription, map[string]any{"key": newKey()})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// The address has used its failures: even a good key is not looked up
	// now, on either transport, nor over POST.
	ctx, cancel := context.WithTimeout(context.Background(), liveWithin)
	defer cancel()
	_, refused, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Authorization": {"Bearer demo-key"}},
	})
	require.Error(t, err)
	require.Equal(t, http.StatusTooManyRequests, refused.StatusCode)
	body, _ := io.ReadAll(refused.Body)
	require.Equal(t, "RATE_LIMITED", rawResponse{body: body}.gql(t).code(t))
	resp, _ = postSSE(t, s, bearer("demo-key"), chargeUpdatedSubscription, map[string]any{"key": newKey()})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "RATE_LIMITED", s.chargeStatus(t, "demo-key", newKey()).code(t))

	after := scrape(t, s.client, s.URL+"/metrics")
	requireDeltas(t, before, after, []metricDelta{
		{"chargeonce_unauthenticated_requests_total", nil, 3},
		{"chargeonce_rate_limited_total", []string{"scope", "ip"}, 3},
	})
}

func TestChargeUpdated_StreamsCarrySubscriptionsOnly(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startListening(t, dbURL, nil)
	key := newKey()
	vars := map[string]any{"key": key, "input": visa(100)}

	// A charge goes over POST only: over a websocket or an event stream it
	// is refused, and nothing is charged.
	c := dialWS(t, s, nil)
	ack, err := c.init(t, map[string]any{"authorization": "Bearer demo-key"})
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	c.subscribe(t, "1", chargeCardMutation, vars)
	m := c.next(t, "1")
	require.Equal(t, "BAD_REQUEST", m.code(t))
	require.Contains(t, m.errors[0].Message, "POST")
	require.True(t, c.next(t, "1").complete)
	c.subscribe(t, "2", chargeStatusQuery, map[string]any{"key": key})
	require.Equal(t, "BAD_REQUEST", c.next(t, "2").code(t), "queries too")
	require.True(t, c.next(t, "2").complete)

	resp, _ := postSSE(t, s, bearer("demo-key"), chargeCardMutation, vars)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sse := &sseStream{resp: resp, lines: bufio.NewScanner(resp.Body)}
	require.Equal(t, "BAD_REQUEST", sse.mustNext(t).code(t))
	require.True(t, sse.mustNext(t).complete)

	// And the subscription needs a stream: POST answers one message, not a stream.
	require.Equal(t, "BAD_REQUEST", s.do(t, bearer("demo-key"), chargeUpdatedSubscription, map[string]any{"key": key}).code(t))
	require.Empty(t, s.providerCharges(t, "demo", key))
	require.Nil(t, s.chargeStatus(t, "demo-key", key).Data.ChargeStatus, "nothing was claimed")

	// A client that lists the event stream beside JSON on every request
	// (urql does) gets JSON: a charge is never taken for a stream.
	urqlAccept := jsonHeaders("Authorization", "Bearer demo-key",
		"Accept", "application/graphql-response+json, application/graphql+json, application/json, text/event-stream, multipart/mixed")
	charged := s.send(t, http.MethodPost, "/graphql", urqlAccept, strings.NewReader(chargeBody(newKey(), `{"amount":100,"currency":"USD","paymentMethod":"pm_card_visa"}`)))
	require.Equal(t, "application/json", charged.header.Get("Content-Type"))
	require.Equal(t, "SUCCEEDED", charged.gql(t).Data.ChargeCard.Status)
}

func TestChargeUpdated_ClientGoesAway_WatcherIsCleanedUp(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startListening(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h"})
	key, _ := processingAttempt(t, s)
	require.Equal(t, 0.0, subscriptionsOpen(t, s))

	ws := liveWS(t, s, "demo-key", key)
	require.Equal(t, "PROCESSING", ws.next(t, "1").payload.Status)
	sse := liveSSE(t, s, "demo-key", key)
	require.Equal(t, "PROCESSING", sse.mustNext(t).payload.Status)
	require.Equal(t, 2.0, subscriptionsOpen(t, s))

	_ = ws.conn.CloseNow() // gone, without a word
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, 1.0, subscriptionsOpen(c, s)) }, liveWithin, 20*time.Millisecond)
	sse.cancel()
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, 0.0, subscriptionsOpen(c, s)) }, liveWithin, 20*time.Millisecond)

	// A client that says it is done (complete) ends its watcher too.
	ws = liveWS(t, s, "demo-key", key)
	require.Equal(t, "PROCESSING", ws.next(t, "1").payload.Status)
	require.Equal(t, 1.0, subscriptionsOpen(t, s))
	ws.send(t, wsMessage{Type: "complete", ID: "1"})
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, 0.0, subscriptionsOpen(c, s)) }, liveWithin, 20*time.Millisecond)
}
