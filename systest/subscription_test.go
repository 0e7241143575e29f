package systest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// TestShutdown_ClosesOpenSubscriptions sends SIGTERM to a server that holds
// a subscription open over a websocket and another over server-sent
// events: both end, and the process exits cleanly well within its 30 s
// shutdown, instead of waiting for the streams.
func TestShutdown_ClosesOpenSubscriptions(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t), "RECONCILE_INTERVAL": "1h"})
	// The provider charged and lost its answer, and the request handed the
	// attempt on: it stays PROCESSING, and its subscriptions stay open.
	key := newKey()
	require.Equal(t, apiclient.Processing, s.chargeCard(t, apiclient.DemoAPIKey, key, withPaymentMethod("pm_card_lostResponse")).Status)
	ws := liveWS(t, s, apiclient.DemoAPIKey, key)
	require.Equal(t, apiclient.Processing, ws.next(t, "1").Status)
	sse := liveSSE(t, s, apiclient.DemoAPIKey, key)
	first, err := sse.next(t)
	require.NoError(t, err)
	require.Equal(t, apiclient.Processing, first.Status)

	requireStopsCleanly(t, s.Process, 20*time.Second, "the shutdown does not wait out its 30 s for the streams")
	_, err = ws.read(t)
	require.Error(t, err, "the websocket is closed")
	require.False(t, errors.Is(err, context.DeadlineExceeded), "closed, not left open: %v", err)
	_, err = sse.next(t)
	require.Error(t, err, "the event stream ends without a complete event: the client knows to ask again")
}

// liveWithin bounds every wait for a subscription: generous, the machine is noisy.
const liveWithin = 30 * time.Second

// chargeUpdatedVars are the variables of the client's own chargeUpdated
// subscription (apiclient.ChargeUpdated_Operation), and chargeUpdated
// its answer.
func chargeUpdatedVars(key string) map[string]any { return map[string]any{"idempotencyKey": key} }

type chargeUpdated struct {
	Data *struct {
		ChargeUpdated *apiclient.ChargeResult `json:"chargeUpdated"`
	} `json:"data"`
	Errors []gqlError `json:"errors"`
}

// result is the state the answer carries; it fails on errors.
func (a chargeUpdated) result(t *testing.T) *apiclient.ChargeResult {
	t.Helper()
	require.Empty(t, a.Errors)
	require.NotNil(t, a.Data)
	require.NotNil(t, a.Data.ChargeUpdated)
	return a.Data.ChargeUpdated
}

// wsClient speaks graphql-transport-ws to a server.
type wsClient struct {
	conn *websocket.Conn
}

type wsMessage struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// liveWS connects to s with apiKey in connection_init and subscribes to
// key as operation 1; the test closes it at its end.
func liveWS(t *testing.T, s *server, apiKey, key string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), liveWithin)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"},
	})
	require.NoError(t, err)
	require.Equal(t, "graphql-transport-ws", conn.Subprotocol())
	t.Cleanup(func() { _ = conn.CloseNow() })
	c := &wsClient{conn: conn}
	c.send(t, "connection_init", "", map[string]any{"authorization": "Bearer " + apiKey})
	ack, err := c.read(t)
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	c.send(t, "subscribe", "1", map[string]any{"query": apiclient.ChargeUpdated_Operation, "variables": chargeUpdatedVars(key)})
	return c
}

func (c *wsClient) send(t *testing.T, typ, id string, payload any) {
	t.Helper()
	m := wsMessage{Type: typ, ID: id}
	if payload != nil {
		raw, err := json.Marshal(payload)
		require.NoError(t, err)
		m.Payload = raw
	}
	ctx, cancel := context.WithTimeout(t.Context(), liveWithin)
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
			c.send(t, "pong", "", nil)
			continue
		}
		return r.m, nil
	}
}

// next is the next state of operation id.
func (c *wsClient) next(t *testing.T, id string) *apiclient.ChargeResult {
	t.Helper()
	m, err := c.read(t)
	require.NoError(t, err)
	require.Equal(t, id, m.ID, "%+v", m)
	require.Equal(t, "next", m.Type, "%+v", m)
	var a chargeUpdated
	require.NoError(t, json.Unmarshal(m.Payload, &a), "not a GraphQL response: %s", m.Payload)
	return a.result(t)
}

// sseStream is a subscription over server-sent events.
type sseStream struct {
	lines *bufio.Scanner
}

// liveSSE subscribes to key over server-sent events with apiKey; the
// stream is closed when the test ends.
func liveSSE(t *testing.T, s *server, apiKey, key string) *sseStream {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": apiclient.ChargeUpdated_Operation, "variables": chargeUpdatedVars(key)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	client := &http.Client{Transport: s.HTTP.Transport} // no overall timeout: the stream lasts
	resp, err := client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return &sseStream{lines: bufio.NewScanner(resp.Body)}
}

// next reads the next state (comments, the keep-alives, are skipped); the
// stream's end without a complete event is io.EOF. A complete event fails
// the test: it would tell a client that nothing more will come.
func (s *sseStream) next(t *testing.T) (*apiclient.ChargeResult, error) {
	t.Helper()
	type event struct {
		name, data string
		err        error
	}
	got := make(chan event, 1)
	go func() {
		var e event
		for s.lines.Scan() {
			line := s.lines.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data += strings.TrimPrefix(line, "data: ")
			case line == "" && e.name != "":
				got <- e
				return
			}
		}
		e.err = s.lines.Err()
		if e.err == nil {
			e.err = io.EOF
		}
		got <- e
	}()
	select {
	case e := <-got:
		if e.err != nil {
			return nil, e.err
		}
		require.NotEqual(t, "complete", e.name, "the stream completed")
		var a chargeUpdated
		require.NoError(t, json.Unmarshal([]byte(e.data), &a), "not a GraphQL response: %s", e.data)
		return a.result(t), nil
	case <-time.After(liveWithin):
		t.Fatalf("no event within %s", liveWithin)
		return nil, nil
	}
}
