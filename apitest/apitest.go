// Package apitest is chargeonce's in-process API acceptance suite and its
// harness, the in-process twin of systest: Start builds a server as the
// command builds one (app.LoadConfig, app.New, app.Handler, StartLoops) and
// serves it without a port, or on a real loopback listener where a test
// needs one (websockets, event streams). Charges and status queries go
// through the typed client, internal/apiclient; other documents and raw
// HTTP go through Do and Send. The suite here tests what crosses packages
// (a charge, a checkout session, a refund, events, crashes of the
// database's answers); packages whose own behaviour needs a whole server
// (graph's transports and limits, the Stripe adapter through the API)
// use the harness from their own tests. Tests that need a real process
// (crashes, signals, the command line, PostgreSQL restarts, listen
// addresses) are systest's.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"chargeonce/db/dbtest"
	"chargeonce/events/eventstest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/app"
	"chargeonce/internal/testlog"
	"chargeonce/loop"
	"chargeonce/payment"
)

// Server is a chargeonce server under test, with a client that reaches it.
type Server struct {
	URL string
	// DatabaseURL is the server's database.
	DatabaseURL string
	Client      *http.Client
	// Passes are its background loops' passes, to wait for.
	Passes *app.Passes
	log    *testlog.Buffer // what the server logged
}

// LogText is what the server has logged so far.
func (s *Server) LogText() string { return s.log.String() }

// testEnv is the environment of every test server, under the test's own.
func testEnv(t *testing.T, dbURL string, env map[string]string) map[string]string {
	// At debug, so that every test that scans the log for secrets scans
	// every line a server can write.
	vars := map[string]string{"DATABASE_URL": dbURL, "SIM_SLOW_DELAY": "300ms", "NATS_URL": eventstest.Shared(t).URL(), "LOG_LEVEL": "debug"}
	maps.Copy(vars, env)
	return vars
}

// Start serves chargeonce in process on a new database of its own, built
// from env on top of the test defaults; see StartOn.
func Start(t *testing.T, env map[string]string) *Server {
	t.Helper()
	return StartOn(t, dbtest.NewDatabase(t), env)
}

// StartOn builds chargeonce against dbURL as the server does, from env
// on top of the test defaults, and serves it in process until the test ends:
// no port and no network. Its client, and the server's own provider client,
// reach every in-process server by its host name, and anything else over
// the network.
func StartOn(t *testing.T, dbURL string, env map[string]string) *Server {
	t.Helper()
	s, _ := build(t, dbURL, env)
	return s
}

// ListenOn is StartOn on a real loopback listener as well, for
// what needs one: a websocket, an event stream.
func ListenOn(t *testing.T, dbURL string, env map[string]string) *Server {
	t.Helper()
	s, handler := build(t, dbURL, env)
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, Client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}, DatabaseURL: dbURL, log: s.log, Passes: s.Passes}
}

// build builds and starts the app of a test server, registered in process,
// and returns it with its handler.
func build(t *testing.T, dbURL string, env map[string]string) (*Server, http.Handler) {
	t.Helper()
	vars := testEnv(t, dbURL, env)
	host := fmt.Sprintf("chargeonce-%d.test", serverSeq.Add(1))
	if vars["APP_ENV"] != "production" || vars["ALLOWED_HOSTS"] != "" {
		// The server answers for its in-process name, as an operator names
		// a server's own (ALLOWED_HOSTS; production without it answers for
		// any name).
		vars["ALLOWED_HOSTS"] = strings.Trim(vars["ALLOWED_HOSTS"]+","+host, ",")
	}
	cfg, err := app.LoadConfig(func(k string) string { return vars[k] })
	require.NoError(t, err)
	logs := &testlog.Buffer{}
	providerURL := cfg.ProviderURL
	if providerURL == "" {
		providerURL = "http://" + host + "/provider"
	}
	a, err := app.New(context.Background(), cfg, app.NewLogger(cfg, logs), providerURL, testNet)
	require.NoError(t, err)
	srv := &inProcessServer{handler: app.Handler(a)}
	inProcess.Store(host, srv)
	stopLoops := a.StartLoops()
	t.Cleanup(func() {
		inProcess.Delete(host)
		srv.inFlight.Wait() // as a server drains at shutdown
		a.CloseStreams()
		stopLoops()
		a.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &Server{URL: "http://" + host, Client: &http.Client{Timeout: time.Minute, Transport: testNet}, DatabaseURL: dbURL, log: logs, Passes: a.Passes()}, srv.handler
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

// Response is a GraphQL answer: a charge's payload, as the typed client
// reads it, or errors.
type Response struct {
	Data struct {
		ChargeCard   *apiclient.ChargeResult `json:"chargeCard"`
		ChargeStatus *apiclient.ChargeResult `json:"chargeStatus"`
	} `json:"data"`
	Errors gqlerror.List `json:"errors"`
}

// Code is the extensions.Code of the only error.
func (r Response) Code(t *testing.T) string {
	t.Helper()
	return OnlyCode(t, r.Errors)
}

// OnlyCode is the extensions.code of the only error of errs.
func OnlyCode(t *testing.T, errs gqlerror.List) string {
	t.Helper()
	require.Len(t, errs, 1, "want exactly one error")
	code, _ := errs[0].Extensions["code"].(string)
	return code
}

// Answered is the typed client's answer as a gqlResponse: its result, or
// the errors of an *apiclient.Error; any other error is returned.
func Answered(res *apiclient.ChargeResult, err error, field string) (Response, error) {
	var r Response
	var e *apiclient.Error
	switch {
	case errors.As(err, &e):
		r.Errors = e.Errors
	case err != nil:
		return r, err
	case field == "chargeStatus":
		r.Data.ChargeStatus = res
	default:
		r.Data.ChargeCard = res
	}
	return r, nil
}

// Helper marks the caller as a helper of t, when t is a test (and not the
// collector of an EventuallyWithT condition).
func Helper(t require.TestingT) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
}

// API is the typed client of s for the merchant of apiKey.
func (s *Server) API(apiKey string) *apiclient.Client {
	return apiclient.New(s.URL, apiKey, s.Client)
}

func (s *Server) ChargeCard(t require.TestingT, apiKey, key string, in apiclient.ChargeCardInput) Response {
	Helper(t)
	res, err := s.API(apiKey).ChargeCard(context.Background(), key, in)
	r, err := Answered(res, err, "chargeCard")
	require.NoError(t, err)
	return r
}

// ChargeCardRaw is chargeCard with an input that no typed input can be.
func (s *Server) ChargeCardRaw(t *testing.T, apiKey, key string, input any) Response {
	t.Helper()
	res, err := s.API(apiKey).ChargeCardRaw(context.Background(), key, input)
	r, err := Answered(res, err, "chargeCard")
	require.NoError(t, err)
	return r
}

func (s *Server) ChargeStatus(t require.TestingT, apiKey, key string) Response {
	Helper(t)
	res, err := s.API(apiKey).ChargeStatus(context.Background(), key)
	r, err := Answered(res, err, "chargeStatus")
	require.NoError(t, err)
	return r
}

// The payload fields of the documents the tests write themselves: the
// typed client's, the demo's.
const PayloadFields = `idempotencyKey status replayed retryAfterMs expiresAt
	charge { id amount currency orderId providerChargeId createdAt } failure { code message }
	nextAction { type url expiresAt }`

const ChargeCardMutation = `mutation Charge($key: String!, $input: ChargeCardInput!) {
	chargeCard(idempotencyKey: $key, input: $input) { ` + PayloadFields + ` } }`

const ChargeStatusQuery = `query Status($key: String!) { chargeStatus(idempotencyKey: $key) { ` + PayloadFields + ` } }`

// Do posts a GraphQL document that the typed client does not send, with
// the given headers.
func (s *Server) Do(t *testing.T, headers map[string]string, query string, vars map[string]any) Response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	h := JSONHeaders()
	for k, v := range headers {
		h.Set(k, v)
	}
	return s.Send(t, http.MethodPost, "/graphql", h, bytes.NewReader(body)).GQL(t)
}

// RawResponse is an HTTP answer, read whole.
type RawResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// Send makes one HTTP request to the server, with every header in headers
// (a key may repeat; a Host header names the request's host), and reads
// the answer whole.
func (s *Server) Send(t *testing.T, method, path string, headers http.Header, body io.Reader) RawResponse {
	t.Helper()
	r, err := s.TrySend(method, path, headers, body)
	require.NoError(t, err)
	return r
}

// TrySend is send for a goroutine of the test's: it returns what fails.
func (s *Server) TrySend(method, path string, headers http.Header, body io.Reader) (RawResponse, error) {
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		return RawResponse{}, err
	}
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if host := headers.Get("Host"); host != "" {
		req.Host = host // net/http sends req.Host, never a Host header
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return RawResponse{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return RawResponse{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// GQL decodes the answer as a GraphQL response.
func (r RawResponse) GQL(t *testing.T) Response {
	t.Helper()
	out, err := r.TryGQL()
	require.NoError(t, err)
	return out
}

// TryGQL is gql for a goroutine of the test's.
func (r RawResponse) TryGQL() (Response, error) {
	var out Response
	if err := json.Unmarshal(r.Body, &out); err != nil {
		return out, fmt.Errorf("not a GraphQL response: %w: %s", err, r.Body)
	}
	return out, nil
}

// JSONHeaders are the headers of a JSON request, with more key/value pairs.
func JSONHeaders(kv ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func Bearer(apiKey string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + apiKey}
}

// ProviderCharges lists the charges the simulated provider made for a
// client key of a merchant: the ground truth of how often money moved.
func (s *Server) ProviderCharges(t *testing.T, merchant, clientKey string) []apiclient.ProviderCharge {
	t.Helper()
	charges, err := s.API("").ProviderCharges(context.Background(), merchant, clientKey)
	require.NoError(t, err)
	return charges
}

func NewKey() string { return uuid.NewString() }

// TookOver is true of a reconciler pass that took over a stuck attempt.
func TookOver(p loop.Pass) bool {
	r, _ := p.Next.Result.(payment.ReconcileResult)
	return r.Taken > 0
}

func Visa(amount int) apiclient.ChargeCardInput {
	return apiclient.ChargeCardInput{Amount: new(amount), Currency: new("USD"), PaymentMethod: "pm_card_visa"}
}

func WithPaymentMethod(pm string) apiclient.ChargeCardInput {
	in := Visa(1999)
	in.PaymentMethod = pm
	return in
}

// Storm sends n identical chargeCard requests at once, spread over servers.
func Storm(t *testing.T, servers []*Server, n int, key string, in apiclient.ChargeCardInput) []Response {
	t.Helper()
	clients := make([]*apiclient.Client, len(servers))
	for i, s := range servers {
		clients[i] = s.API(apiclient.DemoAPIKey)
	}
	answers := apiclient.Storm(context.Background(), clients, n, key, in, 0)
	responses := make([]Response, n)
	for i, a := range answers {
		r, err := Answered(a.Result, a.Err, "chargeCard")
		require.NoError(t, err, "request %d", i)
		responses[i] = r
	}
	return responses
}

// RequireOneCharge checks a storm's answers: never an error, only SUCCEEDED
// with one charge id or PROCESSING, and exactly one charge at the provider.
func RequireOneCharge(t *testing.T, s *Server, key string, in apiclient.ChargeCardInput, responses []Response) {
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
			chargeIDs[p.Charge.Id]++
		case "PROCESSING":
			require.NotNil(t, p.RetryAfterMs)
			require.Positive(t, *p.RetryAfterMs)
		default:
			t.Fatalf("response %d: status %s", i, p.Status)
		}
	}
	t.Logf("statuses over %d requests: %v", len(responses), statuses)
	require.Len(t, chargeIDs, 1, "all SUCCEEDED answers carry one charge id")
	require.Equal(t, 1, len(s.ProviderCharges(t, "demo", key)), "exactly one charge at the provider")

	// Once the first request is done, every retry is a replay of its charge.
	var final *apiclient.ChargeResult
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := s.API(apiclient.DemoAPIKey).ChargeCard(context.Background(), key, in)
		require.NoError(c, err)
		require.Equal(c, "SUCCEEDED", res.Status)
		final = res
	}, 10*time.Second, 50*time.Millisecond)
	require.True(t, final.Replayed)
	for id := range chargeIDs {
		require.Equal(t, id, final.Charge.Id)
	}
}

// Main runs the tests of a package that starts servers with the harness,
// then stops what the harness shares between them, the broker: the body of
// such a package's TestMain.
func Main(m *testing.M) {
	code := m.Run()
	eventstest.StopShared()
	os.Exit(code)
}
