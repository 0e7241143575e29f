package main

import (
	"bytes"
	"chargeonce/internal/app"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/events/eventstest"
	"chargeonce/internal/listening"
	"chargeonce/internal/testlog"
)

// testServer is a chargeonce server under test, with a client that reaches it.
type testServer struct {
	URL    string
	client *http.Client
	log    *syncBuffer // what the server logged
	// shutdown stops a server that startListening runs, as SIGTERM would.
	shutdown func()
}

// stop shuts a listening server down now and waits until run has returned.
func (s *testServer) stop(t *testing.T) {
	t.Helper()
	require.NotNil(t, s.shutdown, "only a server of startListening stops")
	s.shutdown()
}

// logText is what the server has logged so far.
func (s *testServer) logText() string { return s.log.String() }

// testEnv is the environment of every test server, under the test's own.
func testEnv(t *testing.T, dbURL string, env map[string]string) map[string]string {
	vars := map[string]string{"DATABASE_URL": dbURL, "SIM_SLOW_DELAY": "300ms", "NATS_URL": eventstest.Shared(t).URL()}
	maps.Copy(vars, env)
	return vars
}

// startServer builds chargeonce against dbURL as run would, from env on top
// of the test defaults, and serves it in process until the test ends: no
// port and no network. Its client, and the server's own provider client,
// reach every in-process server by its host name, and anything else over the
// network (a server process, say).
func startServer(t *testing.T, dbURL string, env map[string]string) *testServer {
	t.Helper()
	vars := testEnv(t, dbURL, env)
	cfg, err := app.LoadConfig(func(k string) string { return vars[k] })
	require.NoError(t, err)
	logs := &syncBuffer{}
	host := fmt.Sprintf("chargeonce-%d.test", serverSeq.Add(1))
	providerURL := cmp.Or(cfg.ProviderURL, "http://"+host+"/provider")
	a, err := app.New(context.Background(), cfg, app.NewLogger(cfg, logs), providerURL, testNet)
	require.NoError(t, err)
	srv := &inProcessServer{handler: app.Handler(a)}
	inProcess.Store(host, srv)
	stopLoops := a.StartLoops()
	t.Cleanup(func() {
		inProcess.Delete(host)
		srv.inFlight.Wait() // as a server drains at shutdown
		stopLoops()
		a.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &testServer{URL: "http://" + host, client: &http.Client{Timeout: time.Minute, Transport: testNet}, log: logs}
}

var (
	serverSeq atomic.Int64
	inProcess sync.Map // host name → *inProcessServer
)

type inProcessServer struct {
	handler  http.Handler
	inFlight sync.WaitGroup
}

// testNet carries a request to the in-process server named by its host, or
// over the network when there is none.
var testNet http.RoundTripper = inProcessTransport{network: &http.Transport{MaxIdleConnsPerHost: 256}}

type inProcessTransport struct{ network http.RoundTripper }

func (t inProcessTransport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	found, ok := inProcess.Load(req.URL.Host)
	if !ok {
		return t.network.RoundTrip(req)
	}
	srv := found.(*inProcessServer)
	srv.inFlight.Add(1)
	defer srv.inFlight.Done()
	r := req.Clone(req.Context())
	r.RemoteAddr = "127.0.0.1:41234"
	r.RequestURI = req.URL.RequestURI()
	if r.Body == nil {
		r.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	defer func() {
		// A handler that aborts its response (http.ErrAbortHandler, as the
		// development fault and the simulator's lost response do) is a
		// connection the client sees break.
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("in-process server %s: connection broken: %v", req.URL.Host, p)
		}
	}()
	srv.handler.ServeHTTP(rec, r)
	if err := req.Context().Err(); err != nil {
		return nil, err // the client hung up before the answer
	}
	resp = rec.Result()
	resp.Request = req
	return resp, nil
}

// startListening runs chargeonce through run, on a port of its own choosing,
// until the test ends: for what needs a real listener (its address, a
// metrics listener, a server process that charges through it).
func startListening(t *testing.T, dbURL string, env map[string]string) *testServer {
	t.Helper()
	vars := testEnv(t, dbURL, env)
	vars["PORT"] = "0"
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		runErr = run(ctx, []string{"chargeonce", "serve"}, func(k string) string { return vars[k] }, logs, logs)
	}()
	shutdown := sync.OnceFunc(func() { cancel(); <-exited })
	t.Cleanup(func() {
		shutdown()
		require.NoError(t, runErr)
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	s := &testServer{client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}, log: logs,
		shutdown: shutdown}
	s.URL = listeningURL(t, exited, logs)
	s.waitReady(t, exited, logs)
	return s
}

// listeningURL waits for the server to log where it listens, and returns
// its loopback URL.
func listeningURL(t *testing.T, exited <-chan struct{}, logs *syncBuffer) string {
	t.Helper()
	return waitListening(t, exited, logs).Loopback()
}

// waitListening waits for the server's announcement of where it listens.
func waitListening(t *testing.T, exited <-chan struct{}, logs *syncBuffer) listening.Addrs {
	t.Helper()
	var addrs listening.Addrs
	require.Eventually(t, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		for line := range strings.Lines(logs.String()) {
			if a, ok := listening.Parse(line); ok {
				addrs = a
				return true
			}
		}
		return false
	}, 60*time.Second, 10*time.Millisecond, "the server did not say where it listens:\n%s", logs.String())
	require.NotEmpty(t, addrs.API, "the server exited before it listened:\n%s", logs.String())
	return addrs
}

// waitLogged waits until logs hold a line that re matches, and returns the
// first group; it fails the test if the server exits first (exited may be
// nil) or nothing matches within the time given.
func waitLogged(t *testing.T, exited <-chan struct{}, logs *syncBuffer, re *regexp.Regexp, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
		select {
		case <-exited:
			t.Fatalf("server exited before logging %s:\n%s", re, logs.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "nothing logged matches %s after %s:\n%s", re, within, logs.String())
		time.Sleep(10 * time.Millisecond)
	}
}

// waitReady waits until the server answers /readyz, failing the test if it
// exits first or takes more than 30s.
func (s *testServer) waitReady(t *testing.T, exited <-chan struct{}, logs *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := s.client.Get(s.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("server exited before it was ready:\n%s", logs.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "server not ready after 30s:\n%s", logs.String())
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is the log sink the tests read while servers write it.
type syncBuffer = testlog.Buffer

type payload struct {
	IdempotencyKey string  `json:"idempotencyKey"`
	Status         string  `json:"status"`
	Replayed       bool    `json:"replayed"`
	RetryAfterMs   *int    `json:"retryAfterMs"`
	ExpiresAt      *string `json:"expiresAt"`
	Charge         *struct {
		ID               string  `json:"id"`
		Amount           int     `json:"amount"`
		Currency         string  `json:"currency"`
		OrderID          *string `json:"orderId"`
		ProviderChargeID string  `json:"providerChargeId"`
		CreatedAt        string  `json:"createdAt"`
	} `json:"charge"`
	Failure *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"failure"`
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

type gqlResponse struct {
	Data struct {
		ChargeCard   *payload `json:"chargeCard"`
		ChargeStatus *payload `json:"chargeStatus"`
	} `json:"data"`
	Errors []gqlError `json:"errors"`
}

// code is the extensions.code of the only error.
func (r gqlResponse) code(t *testing.T) string {
	t.Helper()
	require.Len(t, r.Errors, 1, "want exactly one error")
	code, _ := r.Errors[0].Extensions["code"].(string)
	return code
}

const payloadFields = `idempotencyKey status replayed retryAfterMs expiresAt
	charge { id amount currency orderId providerChargeId createdAt } failure { code message }`

const chargeCardMutation = `mutation Charge($key: String!, $input: ChargeCardInput!) {
	chargeCard(idempotencyKey: $key, input: $input) { ` + payloadFields + ` } }`

const chargeStatusQuery = `query Status($key: String!) { chargeStatus(idempotencyKey: $key) { ` + payloadFields + ` } }`

// do posts a GraphQL operation with the given headers.
func (s *testServer) do(t *testing.T, headers map[string]string, query string, vars map[string]any) gqlResponse {
	t.Helper()
	out, err := s.tryDo(t, headers, query, vars)
	require.NoError(t, err)
	return out
}

// tryDo is do for a server that may fail under the request: it returns the
// transport error instead of failing the test.
func (s *testServer) tryDo(t *testing.T, headers map[string]string, query string, vars map[string]any) (gqlResponse, error) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return gqlResponse{}, err
	}
	defer resp.Body.Close()
	var out gqlResponse
	err = json.NewDecoder(resp.Body).Decode(&out)
	return out, err
}

// rawResponse is an HTTP answer, read whole.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// send makes one HTTP request to the server, with every header in headers
// (a key may repeat), and reads the answer whole.
func (s *testServer) send(t *testing.T, method, path string, headers http.Header, body io.Reader) rawResponse {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, body)
	require.NoError(t, err)
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

// gql decodes the answer as a GraphQL response.
func (r rawResponse) gql(t *testing.T) gqlResponse {
	t.Helper()
	var out gqlResponse
	require.NoError(t, json.Unmarshal(r.body, &out), "not a GraphQL response: %s", r.body)
	return out
}

// jsonHeaders are the headers of a JSON request, with more key/value pairs.
func jsonHeaders(kv ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func bearer(apiKey string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + apiKey}
}

func (s *testServer) chargeCard(t *testing.T, apiKey, key string, input map[string]any) gqlResponse {
	t.Helper()
	return s.do(t, bearer(apiKey), chargeCardMutation, map[string]any{"key": key, "input": input})
}

func (s *testServer) chargeStatus(t *testing.T, apiKey, key string) gqlResponse {
	t.Helper()
	return s.do(t, bearer(apiKey), chargeStatusQuery, map[string]any{"key": key})
}

type providerCharge struct {
	ID       string            `json:"id"`
	Amount   int64             `json:"amount"`
	Currency string            `json:"currency"`
	Status   string            `json:"status"`
	Key      string            `json:"idempotency_key"`
	Metadata map[string]string `json:"metadata"`
}

// providerCharges lists the charges the simulated provider made for a
// client key of a merchant: the ground truth of how often money moved.
func (s *testServer) providerCharges(t *testing.T, merchant, clientKey string) []providerCharge {
	t.Helper()
	q := url.Values{"merchant": {merchant}, "client_idempotency_key": {clientKey}}
	resp, err := s.client.Get(s.URL + "/provider/v1/charges?" + q.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct {
		Data []providerCharge `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	return list.Data
}

func visa(amount int) map[string]any {
	return map[string]any{"amount": amount, "currency": "USD", "paymentMethod": "pm_card_visa"}
}

func withPaymentMethod(pm string) map[string]any {
	in := visa(1999)
	in["paymentMethod"] = pm
	return in
}

// storm sends n identical chargeCard requests at once, spread over servers.
func storm(t *testing.T, servers []*testServer, n int, key string, input map[string]any) []gqlResponse {
	t.Helper()
	responses := make([]gqlResponse, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			responses[i] = servers[i%len(servers)].chargeCard(t, "demo-key", key, input)
		})
	}
	close(start)
	wg.Wait()
	return responses
}

// requireOneCharge checks a storm's answers: never an error, only SUCCEEDED
// with one charge id or PROCESSING, and exactly one charge at the provider.
func requireOneCharge(t *testing.T, s *testServer, key string, input map[string]any, responses []gqlResponse) {
	t.Helper()
	chargeIDs := map[string]int{}
	statuses := map[string]int{}
	for i, r := range responses {
		require.Empty(t, r.Errors, "response %d", i)
		p := r.Data.ChargeCard
		require.NotNil(t, p, "response %d", i)
		statuses[p.Status]++
		switch p.Status {
		case "SUCCEEDED":
			chargeIDs[p.Charge.ID]++
		case "PROCESSING":
			require.NotNil(t, p.RetryAfterMs)
			require.Positive(t, *p.RetryAfterMs)
		default:
			t.Fatalf("response %d: status %s", i, p.Status)
		}
	}
	t.Logf("statuses over %d requests: %v", len(responses), statuses)
	require.Len(t, chargeIDs, 1, "all SUCCEEDED answers carry one charge id")
	require.Equal(t, 1, len(s.providerCharges(t, "demo", key)), "exactly one charge at the provider")

	// Once the first request is done, every retry is a replay of its charge.
	var final *payload
	require.Eventually(t, func() bool {
		final = s.chargeCard(t, "demo-key", key, input).Data.ChargeCard
		return final != nil && final.Status == "SUCCEEDED"
	}, 10*time.Second, 50*time.Millisecond)
	require.True(t, final.Replayed)
	for id := range chargeIDs {
		require.Equal(t, id, final.Charge.ID)
	}
}
