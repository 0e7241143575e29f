package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/testlog"
	"chargeonce/merchant"
)

// The observability and production-mode parts of the hardening issue: the
// access log and what no log line may carry, and a production server that
// answers like one (metrics_test.go has the metrics).

func TestAccessLog_OneLinePerRequestWithRequestID(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// JSON, so that every attribute can be read back exactly.
	s := StartOn(t, dbURL, map[string]string{"LOG_FORMAT": "json", "RECONCILE_INTERVAL": "1h"})
	_, acmeKey, err := merchant.New(dbtest.Open(t, dbURL), false).CreateAPIKey(context.Background(), "acme", merchant.KeySecret)
	require.NoError(t, err)
	const unknownKey = "co_sk_NotAKeyAnyoneHas"
	post := func(headers http.Header, query string, vars map[string]any) RawResponse {
		body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
		require.NoError(t, err)
		return s.Send(t, http.MethodPost, "/graphql", headers, bytes.NewReader(body))
	}
	auth := func(apiKey string, kv ...string) http.Header {
		return JSONHeaders(append([]string{"Authorization", "Bearer " + apiKey}, kv...)...)
	}
	var clientKeys []string
	chargeVars := func(input apiclient.ChargeCardInput) map[string]any {
		key := NewKey()
		clientKeys = append(clientKeys, key)
		return map[string]any{"key": key, "input": input}
	}

	// A valid X-Request-Id is kept: echoed, and in the request's one line.
	const given = "checkout-7f3a.retry:1_A"
	r := post(auth("demo-key", "X-Request-Id", given), ChargeCardMutation, chargeVars(Visa(100)))
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "SUCCEEDED", r.GQL(t).Data.ChargeCard.Status)
	require.Equal(t, given, r.Header.Get("X-Request-Id"))
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
	r = post(auth(acmeKey), ChargeCardMutation, chargeVars(Visa(250)))
	require.Equal(t, "SUCCEEDED", r.GQL(t).Data.ChargeCard.Status)
	minted := r.Header.Get("X-Request-Id")
	_, err = uuid.Parse(minted)
	require.NoError(t, err, "minted id %q", minted)
	line = accessLine(t, s, minted)
	require.Equal(t, "acme", line["merchant"])
	require.Equal(t, "chargeCard", line["field"])

	// One that is unsafe to log or to echo is replaced.
	longest := strings.Repeat("a", 128)
	require.Equal(t, longest, post(auth("demo-key", "X-Request-Id", longest), ChargeStatusQuery,
		map[string]any{"key": NewKey()}).Header.Get("X-Request-Id"), "128 characters are accepted")
	for _, bad := range []string{"two words", strings.Repeat("b", 129), `quo"te`, "semi;colon", "sl/ash", "été"} {
		r := post(auth("demo-key", "X-Request-Id", bad), ChargeStatusQuery, map[string]any{"key": NewKey()})
		replaced := r.Header.Get("X-Request-Id")
		_, err := uuid.Parse(replaced)
		require.NoError(t, err, "%q is replaced by a minted id, got %q", bad, replaced)
		line := accessLine(t, s, replaced)
		require.Equal(t, "Status", line["operation"])
		require.Equal(t, "chargeStatus", line["field"])
		require.NotContains(t, s.LogText(), bad)
	}

	// A decline and an unknown outcome log their idempotency keys, next to the merchant.
	require.Equal(t, "FAILED", post(auth("demo-key"), ChargeCardMutation,
		chargeVars(WithPaymentMethod("pm_card_chargeDeclined"))).GQL(t).Data.ChargeCard.Status)
	require.Equal(t, "PROCESSING", post(auth("demo-key"), ChargeCardMutation,
		chargeVars(WithPaymentMethod("pm_card_providerError"))).GQL(t).Data.ChargeCard.Status)

	// An unknown key is logged as a failed authentication, without the key.
	r = post(auth(unknownKey, "X-Request-Id", "unknown-key-1"), ChargeCardMutation, chargeVars(Visa(100)))
	require.Equal(t, "UNAUTHENTICATED", r.GQL(t).Code(t))
	line = accessLine(t, s, "unknown-key-1")
	require.NotContains(t, line, "merchant")
	failed := testlog.JSONLines(t, s.LogText(), func(l map[string]any) bool {
		return l["request_id"] == "unknown-key-1" && l["msg"] == "authentication failed"
	})
	require.Len(t, failed, 1)
	require.Equal(t, "WARN", failed[0]["level"])
	require.Equal(t, "unknown or revoked API key", failed[0]["reason"])

	logs := s.LogText()
	secrets := map[string]string{
		"the demo API key": "demo-key", "a created API key": acmeKey, "an unknown API key": unknownKey,
		"a card token": "pm_card_visa", "a declined card's token": "pm_card_chargeDeclined",
		"a failing card's token": "pm_card_providerError",
	}
	for name, secret := range secrets {
		require.NotContains(t, logs, secret, "the log never carries %s", name)
	}
	// Nor does the history of the keys: every row, once the instance wrote
	// what it gathered (a history query writes it first).
	_, err = s.API("demo-key").History(context.Background(), apiclient.AttemptKindCharge, clientKeys[0])
	require.NoError(t, err)
	rows := dbtest.Query[string](t, dbtest.Open(t, dbURL), "SELECT row_to_json(h)::text FROM attempt_history h")
	require.NotEmpty(t, rows)
	for name, secret := range secrets {
		require.NotContains(t, strings.Join(rows, "\n"), secret, "the history never holds %s", name)
	}
	// An idempotency key means something only within its merchant's scope:
	// a line that carries one names the merchant too.
	logged := map[string]bool{}
	for _, l := range testlog.JSONLines(t, logs, func(map[string]any) bool { return true }) {
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

// accessLine waits for the access log line of request id, and requires
// that there is exactly one.
func accessLine(t *testing.T, s *Server, id string) map[string]any {
	t.Helper()
	isAccess := func(l map[string]any) bool { return l["msg"] == "http request" && l["request_id"] == id }
	require.Eventually(t, func() bool {
		for line := range strings.Lines(s.LogText()) {
			if strings.Contains(line, `"msg":"http request"`) && strings.Contains(line, `"request_id":"`+id+`"`) {
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "no access log line for request %s", id)
	lines := testlog.JSONLines(t, s.LogText(), isAccess)
	require.Len(t, lines, 1, "one access log line for request %s", id)
	return lines[0]
}

// TestLogLevel_DebugSaysWhyWarnKeepsQuiet: LOG_LEVEL=debug adds a line for
// each refusal with its reason; warn drops the access log's info lines.
func TestLogLevel_DebugSaysWhyWarnKeepsQuiet(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	debug := StartOn(t, dbURL, map[string]string{"LOG_LEVEL": "debug", "LOG_FORMAT": "json"})
	warn := StartOn(t, dbURL, map[string]string{"LOG_LEVEL": "warn", "LOG_FORMAT": "json"})
	for _, s := range []*Server{debug, warn} {
		r := s.Send(t, http.MethodPost, "/graphql", http.Header{"Content-Type": {"text/plain"}}, strings.NewReader(`{}`))
		require.Equal(t, http.StatusUnsupportedMediaType, r.Status)
		key := NewKey()
		res, err := s.API("demo-key").ChargeCardRaw(context.Background(), key, map[string]any{"amount": 0, "currency": "USD", "paymentMethod": "pm_card_visa"})
		ans, err := Answered(res, err, "chargeCard")
		require.NoError(t, err)
		require.Equal(t, "BAD_USER_INPUT", ans.Code(t))
	}
	refusals := testlog.JSONLines(t, debug.LogText(), func(l map[string]any) bool {
		return l["level"] == "DEBUG" && (l["msg"] == "request refused" || l["msg"] == "operation refused")
	})
	require.Len(t, refusals, 2, "one line for each refusal")
	require.Equal(t, "BAD_REQUEST", refusals[0]["code"])
	require.Contains(t, refusals[0]["reason"], "application/json")
	require.Equal(t, "BAD_USER_INPUT", refusals[1]["code"])
	require.Equal(t, "input.amount", refusals[1]["field"])
	require.Equal(t, "demo", refusals[1]["merchant"])

	quiet := warn.LogText()
	require.NotContains(t, quiet, `"level":"DEBUG"`)
	require.NotContains(t, quiet, `"level":"INFO"`, "not even the access log")
	require.NotEmpty(t, testlog.JSONLines(t, debug.LogText(), func(l map[string]any) bool { return l["msg"] == "http request" }))
}
