package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/merchant"
)

// The observability and production-mode parts of the hardening issue: the
// access log and what no log line may carry, and a production server that
// answers like one (metrics_test.go has the metrics).

func TestAccessLog_OneLinePerRequestWithRequestID(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// JSON, so that every attribute can be read back exactly.
	s := startServer(t, dbURL, map[string]string{"LOG_FORMAT": "json", "RECONCILE_INTERVAL": "1h"})
	_, acmeKey, err := merchant.New(openPool(t, dbURL), false).CreateAPIKey(context.Background(), "acme")
	require.NoError(t, err)
	const unknownKey = "co_sk_NotAKeyAnyoneHas"
	post := func(headers http.Header, query string, vars map[string]any) rawResponse {
		body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
		require.NoError(t, err)
		return s.send(t, http.MethodPost, "/graphql", headers, bytes.NewReader(body))
	}
	auth := func(apiKey string, kv ...string) http.Header {
		return jsonHeaders(append([]string{"Authorization", "Bearer " + apiKey}, kv...)...)
	}
	var clientKeys []string
	chargeVars := func(input map[string]any) map[string]any {
		key := newKey()
		clientKeys = append(clientKeys, key)
		return map[string]any{"key": key, "input": input}
	}

	// A valid X-Request-Id is kept: echoed, and in the request's one line.
	const given = "checkout-7f3a.retry:1_A"
	r := post(auth("demo-key", "X-Request-Id", given), chargeCardMutation, chargeVars(visa(100)))
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "SUCCEEDED", r.gql(t).Data.ChargeCard.Status)
	require.Equal(t, given, r.header.Get("X-Request-Id"))
	line := accessLine(t, s, given)
	require.Equal(t, "INFO", line["level"])
	require.Equal(t, "demo", line["merchant"])
	require.Equal(t, "Charge", line["operation"])
	require.Equal(t, "chargeCard", line["field"])
	require.Equal(t, 200.0, line["status"])
	require.Equal(t, "POST", line["method"])
	require.Equal(t, "/graphql", line["path"])
	require.IsType(t, 0.0, line["duration_ms"])
	require.GreaterOrEqual(t, line["duration_ms"].(float64), 0.0)

	// Without one, the server mints a UUID.
	r = post(auth(acmeKey), chargeCardMutation, chargeVars(visa(250)))
	require.Equal(t, "SUCCEEDED", r.gql(t).Data.ChargeCard.Status)
	minted := r.header.Get("X-Request-Id")
	_, err = uuid.Parse(minted)
	require.NoError(t, err, "minted id %q", minted)
	line = accessLine(t, s, minted)
	require.Equal(t, "acme", line["merchant"])
	require.Equal(t, "chargeCard", line["field"])

	// One that is unsafe to log or to echo is replaced.
	longest := strings.Repeat("a", 128)
	require.Equal(t, longest, post(auth("demo-key", "X-Request-Id", longest), chargeStatusQuery,
		map[string]any{"key": newKey()}).header.Get("X-Request-Id"), "128 characters are accepted")
	for _, bad := range []string{"two words", strings.Repeat("b", 129), `quo"te`, "semi;colon", "sl/ash", "été"} {
		r := post(auth("demo-key", "X-Request-Id", bad), chargeStatusQuery, map[string]any{"key": newKey()})
		replaced := r.header.Get("X-Request-Id")
		_, err := uuid.Parse(replaced)
		require.NoError(t, err, "%q is replaced by a minted id, got %q", bad, replaced)
		line := accessLine(t, s, replaced)
		require.Equal(t, "Status", line["operation"])
		require.Equal(t, "chargeStatus", line["field"])
		require.NotContains(t, s.logText(), bad)
	}

	// A decline and an unknown outcome log their idempotency keys, next to the merchant.
	require.Equal(t, "FAILED", post(auth("demo-key"), chargeCardMutation,
		chargeVars(withPaymentMethod("pm_card_chargeDeclined"))).gql(t).Data.ChargeCard.Status)
	require.Equal(t, "PROCESSING", post(auth("demo-key"), chargeCardMutation,
		chargeVars(withPaymentMethod("pm_card_providerError"))).gql(t).Data.ChargeCard.Status)

	// An unknown key is logged as a failed authentication, without the key.
	r = post(auth(unknownKey, "X-Request-Id", "unknown-key-1"), chargeCardMutation, chargeVars(visa(100)))
	require.Equal(t, "UNAUTHENTICATED", r.gql(t).code(t))
	line = accessLine(t, s, "unknown-key-1")
	require.NotContains(t, line, "merchant")
	failed := logLines(t, s.logText(), func(l map[string]any) bool {
		return l["request_id"] == "unknown-key-1" && l["msg"] == "authentication failed"
	})
	require.Len(t, failed, 1)
	require.Equal(t, "WARN", failed[0]["level"])
	require.Equal(t, "unknown or revoked API key", failed[0]["reason"])

	logs := s.logText()
	for name, secret := range map[string]string{
		"the demo API key": "demo-key", "a created API key": acmeKey, "an unknown API key": unknownKey,
		"a card token": "pm_card_visa", "a declined card's token": "pm_card_chargeDeclined",
		"a failing card's token": "pm_card_providerError",
	} {
		require.NotContains(t, logs, secret, "the log never carries %s", name)
	}
	// An idempotency key means something only within its merchant's scope:
	// a line that carries one names the merchant too.
	logged := map[string]bool{}
	for _, l := range logLines(t, logs, func(map[string]any) bool { return true }) {
		raw, err := json.Marshal(l)
		require.NoError(t, err)
		for _, key := range clientKeys {
			if bytes.Contains(raw, []byte(key)) {
				logged[key] = true
				require.True(t, l["merchant"] != nil || l["merchant_id"] != nil, "a line with an idempotency key and no merchant: %s", raw)
			}
		}
	}
	require.Len(t, logged, len(clientKeys)-1, "every charge logs its key; the unauthenticated request logs none")
	require.False(t, logged[clientKeys[len(clientKeys)-1]])
}

func TestProduction_AnswersLikeProduction(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Listening for real, with metrics on a listener of their own, as production.
	dev := startListening(t, dbURL, map[string]string{"METRICS_ADDR": "127.0.0.1:0"})
	devMetrics := metricsAddr(t, dev)
	_, apiKey, err := merchant.New(openPool(t, dbURL), false).CreateAPIKey(context.Background(), "shop")
	require.NoError(t, err)
	// The real binary, so that everything it writes counts.
	prod := startProcess(t, withFakeStripe(t, map[string]string{
		"APP_ENV":      "production",
		"DATABASE_URL": dbURL,
		"METRICS_ADDR": "127.0.0.1:0",
	}))
	prodMetrics := metricsAddr(t, prod.testServer)
	post := func(s *testServer, apiKey, query string) rawResponse {
		body, err := json.Marshal(map[string]any{"query": query})
		require.NoError(t, err)
		return s.send(t, http.MethodPost, "/graphql", jsonHeaders("Authorization", "Bearer "+apiKey), bytes.NewReader(body))
	}

	// Introspection is refused as a client mistake, however it is asked for.
	for _, query := range []string{
		`{ __schema { types { name } } }`,
		`{ __type(name: "Charge") { name } }`,
		`query { s: __schema { queryType { name } } }`,
		`query { ... on Query { __type(name: "ChargeCardInput") { inputFields { name } } } }`,
		`query { ...F } fragment F on Query { __schema { mutationType { fields { name } } } }`,
	} {
		r := post(prod.testServer, apiKey, query)
		require.Equal(t, http.StatusOK, r.status, query)
		out := rawGQL(t, r)
		require.Nil(t, out.Data, query)
		require.Len(t, out.Errors, 1, query)
		require.Equal(t, "GRAPHQL_VALIDATION_FAILED", out.Errors[0].Extensions["code"], query)
		require.NotContains(t, string(r.body), "Charge", "%s: nothing about the schema", query)

		got := rawGQL(t, post(dev, "demo-key", query))
		require.Empty(t, got.Errors, "development keeps introspection: %s", query)
		require.NotEmpty(t, got.Data, query)
	}
	get := prod.send(t, http.MethodGet, "/graphql?query="+url.QueryEscape(`{ __schema { types { name } } }`), nil, nil)
	require.Equal(t, http.StatusOK, get.status)
	require.Equal(t, "GRAPHQL_VALIDATION_FAILED", rawGQL(t, get).Errors[0].Extensions["code"])
	// __typename is not introspection of the schema.
	typename := rawGQL(t, post(prod.testServer, apiKey, `{ __typename }`))
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
		r := post(prod.testServer, apiKey, mistake.query)
		require.Equal(t, http.StatusOK, r.status, mistake.query)
		out := rawGQL(t, r)
		require.Len(t, out.Errors, 1, mistake.query)
		require.Equal(t, mistake.code, out.Errors[0].Extensions["code"], mistake.query)
		require.NotContains(t, out.Errors[0].Message, "Did you mean", mistake.query)

		inDev := rawGQL(t, post(dev, "demo-key", mistake.query))
		require.Len(t, inDev.Errors, 1, mistake.query)
		require.Equal(t, mistake.code, inDev.Errors[0].Extensions["code"], mistake.query)
		require.Contains(t, inDev.Errors[0].Message, "Did you mean", "development suggests: %s", mistake.query)
	}
	// A real charge still works.
	charged := prod.chargeCard(t, apiKey, newKey(), visa(100))
	require.Empty(t, charged.Errors)
	require.Equal(t, "SUCCEEDED", charged.Data.ChargeCard.Status)

	// Metrics: not on the public port in production, but on METRICS_ADDR.
	require.Equal(t, http.StatusNotFound, prod.send(t, http.MethodGet, "/metrics", nil, nil).status)
	m := scrape(t, prod.client, "http://"+prodMetrics+"/metrics")
	require.Equal(t, 1.0, m.value("chargeonce_charges_total", "outcome", "succeeded", "by", "request"))
	require.Positive(t, m.value("chargeonce_http_request_duration_seconds_count", "operation", "introspection", "code", "200"))
	resp, err := prod.client.Get("http://" + prodMetrics + "/graphql")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the metrics listener serves only /metrics and the profiler")
	// The profiler: on the metrics listener, never on the public port.
	resp, err = prod.client.Get("http://" + prodMetrics + "/debug/pprof/profile?seconds=1")
	require.NoError(t, err)
	profile, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, bytes.HasPrefix(profile, []byte{0x1f, 0x8b}), "a CPU profile is gzipped protobuf")
	require.Equal(t, http.StatusNotFound, prod.send(t, http.MethodGet, "/debug/pprof/", nil, nil).status)
	// Development serves them on both.
	for _, at := range []string{dev.URL, "http://" + devMetrics} {
		require.Positive(t, scrape(t, dev.client, at+"/metrics").value("chargeonce_http_request_duration_seconds_count", "operation", "introspection"), at)
	}

	// Production logs JSON, every line of it, and a client's mistake is no ERROR.
	// (The process's output arrives through a pipe: only whole lines count.)
	prodLog := prod.logText()
	prodLog = prodLog[:strings.LastIndex(prodLog, "\n")+1]
	lines := logLines(t, prodLog, func(map[string]any) bool { return true })
	require.NotEmpty(t, lines)
	require.Len(t, lines, strings.Count(prodLog, "\n"), "every line is a JSON object")
	for _, l := range lines {
		require.NotEqual(t, "ERROR", l["level"], "an ERROR line: %v", l)
	}
	require.NotEmpty(t, logLines(t, prodLog, func(l map[string]any) bool { return l["msg"] == "chargeonce listening" }))
	// Development logs text, for people.
	requireTextLog(t, dev.logText())
	// LOG_FORMAT=text is honoured in production.
	text := startServer(t, dbURL, withFakeStripe(t, map[string]string{"APP_ENV": "production", "LOG_FORMAT": "text"}))
	require.Equal(t, "SUCCEEDED", text.chargeCard(t, apiKey, newKey(), visa(100)).Data.ChargeCard.Status)
	requireTextLog(t, text.logText())
}

func TestDevelopment_ListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	other := nonLoopbackIPv4(t)
	dbURL := dbtest.NewDatabase(t)

	dev := startListening(t, dbURL, nil)
	require.True(t, reachable(dev.URL), "loopback")
	require.False(t, reachable(atAddress(t, dev, other)), "development listens on loopback only, not on %s", other)

	everywhere := startListening(t, dbURL, map[string]string{"HOST": "0.0.0.0"})
	require.True(t, reachable(everywhere.URL))
	require.True(t, reachable(atAddress(t, everywhere, other)), "HOST=0.0.0.0 listens on %s too", other)
}

func TestProduction_ListensOnAllInterfaces(t *testing.T) {
	t.Parallel()
	other := nonLoopbackIPv4(t)
	dbURL := dbtest.NewDatabase(t)
	prod := startListening(t, dbURL, withFakeStripe(t, map[string]string{"APP_ENV": "production"}))
	require.True(t, reachable(prod.URL))
	require.True(t, reachable(atAddress(t, prod, other)), "production listens on %s", other)
}

// metricsAddr is the address (host:port) of s's metrics listener, from
// its log.
func metricsAddr(t *testing.T, s *testServer) string {
	t.Helper()
	u, err := url.Parse(waitListening(t, nil, s.log).Metrics)
	require.NoError(t, err)
	return u.Host
}

// logLines parses a JSON log and returns the lines keep selects; a line
// that is not a JSON object fails the test.
func logLines(t *testing.T, log string, keep func(map[string]any) bool) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(log) {
		var l map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &l), "not a JSON log line: %q", line)
		if keep(l) {
			out = append(out, l)
		}
	}
	return out
}

// accessLine waits for the access log line of request id, and requires
// that there is exactly one.
func accessLine(t *testing.T, s *testServer, id string) map[string]any {
	t.Helper()
	isAccess := func(l map[string]any) bool { return l["msg"] == "http request" && l["request_id"] == id }
	require.Eventually(t, func() bool {
		for line := range strings.Lines(s.logText()) {
			if strings.Contains(line, `"msg":"http request"`) && strings.Contains(line, `"request_id":"`+id+`"`) {
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "no access log line for request %s", id)
	lines := logLines(t, s.logText(), isAccess)
	require.Len(t, lines, 1, "one access log line for request %s", id)
	return lines[0]
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

type rawGQLResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

// rawGQL decodes any GraphQL answer, keeping its data as it came.
func rawGQL(t *testing.T, r rawResponse) rawGQLResponse {
	t.Helper()
	var out rawGQLResponse
	require.NoError(t, json.Unmarshal(r.body, &out), "not a GraphQL response: %s", r.body)
	if string(out.Data) == "null" {
		out.Data = nil
	}
	return out
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
func atAddress(t *testing.T, s *testServer, ip string) string {
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
