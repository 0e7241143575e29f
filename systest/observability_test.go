package systest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/testlog"
	"chargeonce/merchant"
	"chargeonce/metrics/metricstest"
	"chargeonce/provider/stripe/stripefake"
)

// A production server answers like one, and each environment listens where
// it should.

func TestProduction_AnswersLikeProduction(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Metrics on a listener of their own, as production.
	dev := startServer(t, map[string]string{"DATABASE_URL": dbURL, "METRICS_ADDR": "127.0.0.1:0"})
	devMetrics := metricsAddr(t, dev)
	_, apiKey, err := merchant.New(dbtest.Open(t, dbURL), false).CreateAPIKey(t.Context(), "shop", merchant.KeySecret)
	require.NoError(t, err)
	prod := startServer(t, stripefake.Start(t).Env(map[string]string{
		"APP_ENV":      "production",
		"DATABASE_URL": dbURL,
		"METRICS_ADDR": "127.0.0.1:0",
	}))
	prodMetrics := metricsAddr(t, prod)
	post := func(s *server, apiKey, query string) rawResponse {
		body, err := json.Marshal(map[string]any{"query": query})
		require.NoError(t, err)
		return s.send(t, http.MethodPost, "/graphql",
			http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + apiKey}}, bytes.NewReader(body))
	}

	// Introspection is refused as a client mistake, however it is asked for.
	for _, query := range []string{
		`{ __schema { types { name } } }`,
		`{ __type(name: "Charge") { name } }`,
		`query { s: __schema { queryType { name } } }`,
		`query { ... on Query { __type(name: "ChargeCardInput") { inputFields { name } } } }`,
		`query { ...F } fragment F on Query { __schema { mutationType { fields { name } } } }`,
	} {
		r := post(prod, apiKey, query)
		require.Equal(t, http.StatusOK, r.status, query)
		out := r.gql(t)
		require.Nil(t, out.Data, query)
		require.Len(t, out.Errors, 1, query)
		require.Equal(t, "GRAPHQL_VALIDATION_FAILED", out.Errors[0].Extensions["code"], query)
		require.NotContains(t, string(r.body), "Charge", "%s: nothing about the schema", query)

		got := post(dev, apiclient.DemoAPIKey, query).gql(t)
		require.Empty(t, got.Errors, "development keeps introspection: %s", query)
		require.NotEmpty(t, got.Data, query)
	}
	get := prod.send(t, http.MethodGet, "/graphql?query="+url.QueryEscape(`{ __schema { types { name } } }`), nil, nil)
	require.Equal(t, http.StatusOK, get.status)
	require.Equal(t, "GRAPHQL_VALIDATION_FAILED", get.gql(t).Errors[0].Extensions["code"])
	// __typename is not introspection of the schema.
	typename := post(prod, apiKey, `{ __typename }`).gql(t)
	require.Empty(t, typename.Errors)
	require.JSONEq(t, `{"__typename":"Query"}`, string(typename.Data))

	// Mistakes get no suggestions in production, and do in development:
	// a misspelled field, argument, input field or type, or a missing selection.
	for _, mistake := range []struct{ query, code string }{
		{`{ chargeStatu(idempotencyKey: "x") { status } }`, "GRAPHQL_VALIDATION_FAILED"},
		{`{ chargeStatus(idempotencyKey: "x") { statu } }`, "GRAPHQL_VALIDATION_FAILED"},
		{`{ chargeStatus(idempotencyKey: "x") { charge } }`, "GRAPHQL_VALIDATION_FAILED"},
		{`{ chargeStatus(idempotencyKey: "x", idempotencyKy: "y") { status } }`, "GRAPHQL_VALIDATION_FAILED"},
		{`{ chargeStatus(idempotencyKey: "x") { ...F } } fragment F on ChargeCardPayloa { status }`, "GRAPHQL_VALIDATION_FAILED"},
		{`mutation { chargeCard(idempotencyKey: "k", input: { amount: 1, currency: "USD", paymentMethod: "pm_card_visa", orderID: "o" }) { status } }`,
			"BAD_USER_INPUT"},
	} {
		r := post(prod, apiKey, mistake.query)
		require.Equal(t, http.StatusOK, r.status, mistake.query)
		out := r.gql(t)
		require.Len(t, out.Errors, 1, mistake.query)
		require.Equal(t, mistake.code, out.Errors[0].Extensions["code"], mistake.query)
		require.NotContains(t, out.Errors[0].Message, "Did you mean", mistake.query)

		inDev := post(dev, apiclient.DemoAPIKey, mistake.query).gql(t)
		require.Len(t, inDev.Errors, 1, mistake.query)
		require.Equal(t, mistake.code, inDev.Errors[0].Extensions["code"], mistake.query)
		require.Contains(t, inDev.Errors[0].Message, "Did you mean", "development suggests: %s", mistake.query)
	}
	// A real charge still works.
	require.Equal(t, "SUCCEEDED", prod.chargeCard(t, apiKey, newKey(), visa(100)).Status)

	// Metrics: not on the public port in production, but on METRICS_ADDR.
	require.Equal(t, http.StatusNotFound, prod.send(t, http.MethodGet, "/metrics", nil, nil).status)
	m := metricstest.Scrape(t, prod.HTTP, "http://"+prodMetrics+"/metrics")
	require.Equal(t, 1.0, m.Value("chargeonce_charges_total", "outcome", "succeeded", "by", "request"))
	require.Positive(t, m.Value("chargeonce_http_request_duration_seconds_count", "operation", "introspection", "code", "200"))
	resp, err := prod.HTTP.Get("http://" + prodMetrics + "/graphql")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the metrics listener serves only /metrics and the profiler")
	// The profiler: on the metrics listener, never on the public port.
	resp, err = prod.HTTP.Get("http://" + prodMetrics + "/debug/pprof/profile?seconds=1")
	require.NoError(t, err)
	profile, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, bytes.HasPrefix(profile, []byte{0x1f, 0x8b}), "a CPU profile is gzipped protobuf")
	require.Equal(t, http.StatusNotFound, prod.send(t, http.MethodGet, "/debug/pprof/", nil, nil).status)
	// Development serves them on both.
	for _, at := range []string{dev.URL, "http://" + devMetrics} {
		require.Positive(t, metricstest.Scrape(t, dev.HTTP, at+"/metrics").Value("chargeonce_http_request_duration_seconds_count", "operation", "introspection"), at)
	}

	// Production logs JSON, every line of it, and a client's mistake is no
	// ERROR. (The process's output is kept line by line: only whole lines.)
	prodLog := prod.Output()
	lines := testlog.JSONLines(t, prodLog, func(map[string]any) bool { return true })
	require.NotEmpty(t, lines)
	require.Len(t, lines, strings.Count(prodLog, "\n"), "every line is a JSON object")
	for _, l := range lines {
		require.NotEqual(t, "ERROR", l["level"], "an ERROR line: %v", l)
	}
	require.NotEmpty(t, testlog.JSONLines(t, prodLog, func(l map[string]any) bool { return l["msg"] == "chargeonce listening" }))
	// Development logs text, for people. A process writes its access line
	// once the answer is on its way: wait for it.
	accessLine := regexp.MustCompile(`level=INFO msg="http request"`)
	waitLogged(t, dev.Process, accessLine, 10*time.Second)
	requireTextLog(t, dev.Output())
	// LOG_FORMAT=text is honoured in production.
	text := startServer(t, stripefake.Start(t).Env(map[string]string{"APP_ENV": "production", "LOG_FORMAT": "text", "DATABASE_URL": dbURL}))
	require.Equal(t, "SUCCEEDED", text.chargeCard(t, apiKey, newKey(), visa(100)).Status)
	waitLogged(t, text.Process, accessLine, 10*time.Second)
	requireTextLog(t, text.Output())
}

func TestDevelopment_ListensOnLoopbackOnly(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	other := nonLoopbackIPv4(t)
	dbURL := dbtest.NewDatabase(t)

	dev := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	require.True(t, reachable(dev.URL), "loopback")
	require.False(t, reachable(atAddress(t, dev, other)), "development listens on loopback only, not on %s", other)

	everywhere := startServer(t, map[string]string{"DATABASE_URL": dbURL, "HOST": "0.0.0.0"})
	require.True(t, reachable(everywhere.URL))
	require.True(t, reachable(atAddress(t, everywhere, other)), "HOST=0.0.0.0 listens on %s too", other)
}

func TestProduction_ListensOnAllInterfaces(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	other := nonLoopbackIPv4(t)
	dbURL := dbtest.NewDatabase(t)
	prod := startServer(t, stripefake.Start(t).Env(map[string]string{"APP_ENV": "production", "DATABASE_URL": dbURL}))
	require.True(t, reachable(prod.URL))
	require.True(t, reachable(atAddress(t, prod, other)), "production listens on %s", other)
}

// rawResponse is an HTTP answer, read whole.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// send makes one HTTP request to the server, deliberately not one the
// typed client would send, and reads the answer whole.
func (s *server) send(t *testing.T, method, path string, header http.Header, body io.Reader) rawResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, body)
	require.NoError(t, err)
	req.Header = header
	if req.Header == nil {
		req.Header = http.Header{}
	}
	resp, err := s.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// gqlAnswer is any GraphQL answer, its data kept as it came (nil for null).
type gqlAnswer struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

// gql decodes the answer as a GraphQL response.
func (r rawResponse) gql(t *testing.T) gqlAnswer {
	t.Helper()
	var out gqlAnswer
	require.NoError(t, json.Unmarshal(r.body, &out), "not a GraphQL response: %s", r.body)
	if string(out.Data) == "null" {
		out.Data = nil
	}
	return out
}

// metricsAddr is the address (host:port) of s's metrics listener, as it
// announced it.
func metricsAddr(t *testing.T, s *server) string {
	t.Helper()
	u, err := url.Parse(s.Addrs.Metrics)
	require.NoError(t, err)
	require.NotEmpty(t, u.Host, "no metrics listener announced")
	return u.Host
}

// requireTextLog checks that a log is slog's text format, not JSON.
func requireTextLog(t *testing.T, log string) {
	t.Helper()
	require.Contains(t, log, `level=INFO msg="http request"`)
	for line := range strings.Lines(log) {
		require.True(t, strings.HasPrefix(line, "time="), "not a text log line: %q", line)
		require.False(t, json.Valid([]byte(line)), "a JSON line in a text log: %q", line)
	}
}

// nonLoopbackIPv4 is an IPv4 address of an up interface other than
// loopback; the test is skipped on a machine without one.
func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		require.NoError(t, err)
		for _, a := range addrs {
			if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.To4() != nil && !ipnet.IP.IsLoopback() {
				return ipnet.IP.String()
			}
		}
	}
	t.Skip("no up network interface with a non-loopback IPv4 address: cannot tell loopback-only from every interface")
	return ""
}

// atAddress is s's URL with its host replaced by ip.
func atAddress(t *testing.T, s *server, ip string) string {
	t.Helper()
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	return "http://" + net.JoinHostPort(ip, u.Port())
}

// reachable reports whether a server answers /healthz at base.
func reachable(base string) bool {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
