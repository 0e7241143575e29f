// Package graphtest is the test client of chargeUpdated, the subscription
// of /graphql: a websocket that speaks graphql-transport-ws, and an event
// stream (POST with Accept: text/event-stream), each read message by
// message with a deadline, so that a test that waits for news fails instead
// of hanging. The API tests and the process tests subscribe with it; queries
// and mutations go through internal/apiclient.
package graphtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"chargeonce/internal/apiclient"
)

// Within bounds every wait for a subscription's next message: generous, the
// machine is noisy.
const Within = 30 * time.Second

// Message is one thing a subscription said: a state, errors, or its end.
type Message struct {
	Result   *apiclient.ChargeResult
	Errors   gqlerror.List
	Complete bool
}

// Code is the extensions.code of the message's only error.
func (m Message) Code(t *testing.T) string {
	t.Helper()
	require.Len(t, m.Errors, 1, "want exactly one error")
	code, _ := m.Errors[0].Extensions["code"].(string)
	return code
}

// response decodes a GraphQL response of the subscription.
func response(b []byte) (Message, error) {
	var r struct {
		Data *struct {
			ChargeUpdated *apiclient.ChargeResult `json:"chargeUpdated"`
		} `json:"data"`
		Errors gqlerror.List `json:"errors"`
	}
	err := json.Unmarshal(b, &r)
	m := Message{Errors: r.Errors}
	if r.Data != nil {
		m.Result = r.Data.ChargeUpdated
	}
	return m, err
}

// vars are the typed client's variables of chargeUpdated for key.
func vars(key string) map[string]any { return map[string]any{"idempotencyKey": key} }

// WS is a websocket that speaks graphql-transport-ws.
type WS struct {
	conn *websocket.Conn
}

// Frame is one graphql-transport-ws message.
type Frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// DialWS opens a websocket to /graphql of the server at serverURL (http://…)
// with the graphql-transport-ws subprotocol and the given headers; the test
// closes it at its end.
func DialWS(t *testing.T, serverURL string, header http.Header) *WS {
	t.Helper()
	return DialWSFrom(t, nil, serverURL, header)
}

// DialWSFrom is DialWS over client (nil: the default one), e.g. from
// another client address (ClientFrom).
func DialWSFrom(t *testing.T, client *http.Client, serverURL string, header http.Header) *WS {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Within)
	defer cancel()
	c, refused, err := TryDialWS(ctx, client, serverURL, header)
	if refused != nil {
		body, _ := io.ReadAll(refused.Body)
		t.Fatalf("websocket refused: HTTP %d: %s", refused.StatusCode, body)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.conn.CloseNow() })
	return c
}

// TryDialWS is DialWSFrom for a goroutine of the test's: it returns the
// server's answer to a refused upgrade (with its body), or the error. The
// caller closes what it opened.
func TryDialWS(ctx context.Context, client *http.Client, serverURL string, header http.Header) (*WS, *http.Response, error) {
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(serverURL, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: header, HTTPClient: client,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, resp, err
		}
		return nil, nil, err
	}
	if conn.Subprotocol() != "graphql-transport-ws" {
		_ = conn.CloseNow()
		return nil, nil, fmt.Errorf("subprotocol %q", conn.Subprotocol())
	}
	return &WS{conn: conn}, nil, nil
}

// ClientFrom is an HTTP client whose connections leave from ip, an address
// of the loopback network (127.0.0.0/8 is all this machine's): to the
// server, another client. It has no timeout, since a stream lasts.
func ClientFrom(ip string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 64}}
}

// SubscribeWS connects to the server at serverURL with apiKey in
// connection_init and subscribes to key as operation "1".
func SubscribeWS(t *testing.T, serverURL, apiKey, key string) *WS {
	t.Helper()
	c := DialWS(t, serverURL, nil)
	ack, err := c.Init(t, map[string]any{"authorization": "Bearer " + apiKey})
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	c.Subscribe(t, "1", apiclient.ChargeUpdated_Operation, vars(key))
	return c
}

// Send sends one frame.
func (c *WS) Send(t *testing.T, m Frame) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Within)
	defer cancel()
	require.NoError(t, wsjson.Write(ctx, c.conn, m))
}

// Read returns the next frame that is not a ping (which it answers), or the
// error that ended the connection; it fails the test after Within. (A
// read's context does not cut a read that waits for a frame: closing the
// connection does.)
func (c *WS) Read(t *testing.T) (Frame, error) {
	t.Helper()
	type result struct {
		m   Frame
		err error
	}
	// One deadline for the call: the server's pings must not keep it waiting.
	deadline := time.After(Within)
	for {
		got := make(chan result, 1)
		go func() {
			var m Frame
			err := wsjson.Read(context.Background(), c.conn, &m)
			got <- result{m, err}
		}()
		var r result
		select {
		case r = <-got:
		case <-deadline:
			_ = c.conn.CloseNow()
			t.Fatalf("no websocket message within %s", Within)
		}
		if r.err != nil {
			return Frame{}, r.err
		}
		if r.m.Type == "ping" {
			c.Send(t, Frame{Type: "pong"})
			continue
		}
		return r.m, nil
	}
}

// Init sends connection_init with payload and returns the server's answer.
func (c *WS) Init(t *testing.T, payload map[string]any) (Frame, error) {
	t.Helper()
	raw, err := json.Marshal(payload)
	require.NoError(t, err)
	c.Send(t, Frame{Type: "connection_init", Payload: raw})
	return c.Read(t)
}

// Subscribe starts an operation under id.
func (c *WS) Subscribe(t *testing.T, id, query string, vars map[string]any) {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	c.Send(t, Frame{Type: "subscribe", ID: id, Payload: raw})
}

// Next is the next message of operation id.
func (c *WS) Next(t *testing.T, id string) Message {
	t.Helper()
	m, err := c.Read(t)
	require.NoError(t, err)
	require.Equal(t, id, m.ID, "%+v", m)
	switch m.Type {
	case "next":
		r, err := response(m.Payload)
		require.NoError(t, err, "not a GraphQL response: %s", m.Payload)
		return r
	case "complete":
		return Message{Complete: true}
	case "error":
		var errs gqlerror.List
		require.NoError(t, json.Unmarshal(m.Payload, &errs))
		return Message{Errors: errs}
	}
	t.Fatalf("unexpected message %+v", m)
	return Message{}
}

// TryRead is Read for a goroutine of the test's: the next frame that is
// not a ping (which it answers), or the error that ended the connection or
// ctx.
func (c *WS) TryRead(ctx context.Context) (Frame, error) {
	for {
		var m Frame
		if err := wsjson.Read(ctx, c.conn, &m); err != nil {
			return Frame{}, err
		}
		if m.Type != "ping" {
			return m, nil
		}
		if err := wsjson.Write(ctx, c.conn, Frame{Type: "pong"}); err != nil {
			return Frame{}, err
		}
	}
}

// TryInit is Init for a goroutine of the test's, with apiKey in the
// payload: the server's answer, or the error.
func (c *WS) TryInit(ctx context.Context, apiKey string) (Frame, error) {
	raw, err := json.Marshal(map[string]any{"authorization": "Bearer " + apiKey})
	if err != nil {
		return Frame{}, err
	}
	if err := wsjson.Write(ctx, c.conn, Frame{Type: "connection_init", Payload: raw}); err != nil {
		return Frame{}, err
	}
	return c.TryRead(ctx)
}

// TrySubscribe is Subscribe for a goroutine of the test's.
func (c *WS) TrySubscribe(ctx context.Context, id, query string, vars map[string]any) error {
	raw, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	return wsjson.Write(ctx, c.conn, Frame{Type: "subscribe", ID: id, Payload: raw})
}

// CloseNow drops the connection without a word, as a client that is gone.
func (c *WS) CloseNow() error { return c.conn.CloseNow() }

// CloseStatus is the close code a connection ended with, -1 when none.
func CloseStatus(err error) websocket.StatusCode { return websocket.CloseStatus(err) }

// SSE is a subscription over server-sent events.
type SSE struct {
	Resp   *http.Response
	lines  *bufio.Scanner
	Cancel context.CancelFunc
}

// PostSSE posts a GraphQL operation to /graphql of the server at serverURL
// with Accept: text/event-stream, over client's transport (without its
// timeout: a stream lasts); the test closes it at its end.
func PostSSE(t *testing.T, client *http.Client, serverURL string, headers map[string]string, query string, vars map[string]any) (*http.Response, context.CancelFunc) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: client.Transport}).Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp, cancel
}

// NewSSE reads the event stream of resp.
func NewSSE(resp *http.Response) *SSE { return &SSE{Resp: resp, lines: bufio.NewScanner(resp.Body)} }

// SubscribeSSE subscribes to key over server-sent events with apiKey.
func SubscribeSSE(t *testing.T, client *http.Client, serverURL, apiKey, key string) *SSE {
	t.Helper()
	resp, cancel := PostSSE(t, client, serverURL, map[string]string{"Authorization": "Bearer " + apiKey},
		apiclient.ChargeUpdated_Operation, vars(key))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sse := NewSSE(resp)
	sse.Cancel = cancel
	return sse
}

// Next reads the next event (comments, the keep-alives, are skipped); the
// stream's end without a complete event is io.EOF. It fails the test after
// Within.
func (s *SSE) Next(t *testing.T) (Message, error) {
	t.Helper()
	type result struct {
		m   Message
		err error
	}
	got := make(chan result, 1)
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
					got <- result{m: Message{Complete: true}}
					return
				}
				m, err := response([]byte(data))
				got <- result{m, err}
				return
			}
		}
		err := s.lines.Err()
		if err == nil {
			err = io.EOF
		}
		got <- result{err: err}
	}()
	select {
	case r := <-got:
		return r.m, r.err
	case <-time.After(Within):
		t.Fatalf("no event within %s", Within)
		return Message{}, nil
	}
}

// MustNext is Next, which must not fail.
func (s *SSE) MustNext(t *testing.T) Message {
	t.Helper()
	m, err := s.Next(t)
	require.NoError(t, err)
	return m
}
