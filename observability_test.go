package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/payment"
)

// The observability and production-mode parts of the hardening issue:
// metrics that move as charges happen, the access log and what no log line
// may carry, and a production server that answers like one.

func TestMetrics_MoveAsChargesHappen(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// No reconciler pass: every count here is the requests' own. A slow card
	// takes two seconds, time enough to send a second request while it works.
	s := startServer(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h", "SIM_SLOW_DELAY": "2s"})
	before := scrape(t, s.client, s.URL+"/metrics")
	require.Contains(t, before, "chargeonce_stuck_processing_attempts")
	require.Zero(t, before.value("chargeonce_stuck_processing_attempts"))
	chargeCards := 0
	charge := func(apiKey, key string, input map[string]any) gqlResponse {
		chargeCards++
		return s.chargeCard(t, apiKey, key, input)
	}

	// A charge, its replay, a decline, the key reused, the order paid again.
	paid := visa(1999)
	paid["orderId"] = "order-paid"
	keyA := newKey()
	require.Equal(t, "SUCCEEDED", charge("demo-key", keyA, paid).Data.ChargeCard.Status)
	require.True(t, charge("demo-key", keyA, paid).Data.ChargeCard.Replayed)
	require.Equal(t, "FAILED", charge("demo-key", newKey(), withPaymentMethod("pm_card_chargeDeclined")).Data.ChargeCard.Status)
	otherAmount := maps.Clone(paid)
	otherAmount["amount"] = 2000
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", charge("demo-key", keyA, otherAmount).code(t))
	require.Equal(t, "ORDER_ALREADY_PAID", charge("demo-key", newKey(), paid).code(t))

	// An outcome nobody knows: the provider fails every call, the inline
	// retries included. Its order is being paid, so another key is refused;
	// a retry takes the released attempt over and asks the provider again.
	unknown := withPaymentMethod("pm_card_providerError")
	unknown["orderId"] = "order-pending"
	keyD := newKey()
	require.Equal(t, "PROCESSING", charge("demo-key", keyD, unknown).Data.ChargeCard.Status)
	pending := visa(500)
	pending["orderId"] = "order-pending"
	require.Equal(t, "ORDER_ALREADY_PAID", charge("demo-key", newKey(), pending).code(t))
	require.Equal(t, "PROCESSING", charge("demo-key", keyD, unknown).Data.ChargeCard.Status)

	// A second request while the first still works on the key.
	keyE, slow := newKey(), withPaymentMethod("pm_card_slow")
	type answer struct {
		r   gqlResponse
		err error
	}
	first := make(chan answer, 1)
	chargeCards++
	go func() {
		r, err := s.tryDo(t, bearer("demo-key"), chargeCardMutation, map[string]any{"key": keyE, "input": slow})
		first <- answer{r, err}
	}()
	require.Eventually(t, func() bool {
		st := s.chargeStatus(t, "demo-key", keyE).Data.ChargeStatus
		return st != nil && st.Status == "PROCESSING"
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, "PROCESSING", charge("demo-key", keyE, slow).Data.ChargeCard.Status)
	got := <-first
	require.NoError(t, got.err)
	require.Equal(t, "SUCCEEDED", got.r.Data.ChargeCard.Status)

	// Callers without a valid API key.
	require.Equal(t, "UNAUTHENTICATED", charge("co_sk_NotAKeyAnyoneHas", newKey(), visa(100)).code(t))
	chargeCards++
	require.Equal(t, "UNAUTHENTICATED", s.do(t, nil, chargeCardMutation, map[string]any{"key": newKey(), "input": visa(100)}).code(t))

	after := scrape(t, s.client, s.URL+"/metrics")
	requireDeltas(t, before, after, []metricDelta{
		{"chargeonce_charges_total", []string{"outcome", "succeeded", "by", "request"}, 2},
		{"chargeonce_charges_total", []string{"outcome", "failed", "by", "request"}, 1},
		{"chargeonce_charges_total", []string{"by", "reconciler"}, 0},
		{"chargeonce_charge_replays_total", nil, 1},
		{"chargeonce_charge_in_flight_total", nil, 1},
		{"chargeonce_charge_idempotency_key_reused_total", nil, 1},
		// One order paid, one being paid under another key.
		{"chargeonce_charge_order_already_paid_total", nil, 2},
		{"chargeonce_charge_outcome_unknown_total", nil, 1},
		{"chargeonce_charge_retry_takeovers_total", nil, 1},
		{"chargeonce_unauthenticated_requests_total", nil, 2},
		{"chargeonce_rate_limited_total", nil, 0},
		// Two charges went through, one was declined; the unknown outcome
		// was sent three times inline (the first call and two retries) and
		// once more by the retry that took it over, after looking it up.
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "create_charge", "result", "ok"}, 2},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "create_charge", "result", "declined"}, 1},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "create_charge", "result", "unknown"}, 4},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "find_charge", "result", "not_found"}, 1},
		{"chargeonce_provider_errors_total", []string{"operation", "create_charge"}, 4},
		{"chargeonce_provider_errors_total", []string{"operation", "find_charge"}, 0},
		// GraphQL errors are answers, not HTTP failures.
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "chargeCard"}, float64(chargeCards)},
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "chargeCard", "code", "200"}, float64(chargeCards)},
		{"chargeonce_reconciler_takeovers_total", nil, 0},
		{"chargeonce_retention_deleted_total", nil, 0},
	})
	require.Equal(t, 1.0, after.value("chargeonce_stuck_processing_attempts"), "keyD waits for the reconciler")
	require.Positive(t, after.value("chargeonce_provider_request_duration_seconds_sum", "operation", "create_charge", "result", "ok"))
	for _, name := range []string{"pgxpool_acquired_conns", "pgxpool_total_conns", "pgxpool_max_conns", "pgxpool_acquire_count"} {
		require.Contains(t, after, name)
		require.Equal(t, "chargeonce", after[name][0].labels["db"], name)
	}
	require.Positive(t, after.value("pgxpool_acquire_count"))
	require.Contains(t, after, "go_goroutines")
}

func TestMetrics_ReconcilerTakesOverRedrivesAndGivesUp(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// The request gives the attempt up after half the lease; the window
	// leaves the reconciler seconds of passes to send it again, even on a
	// busy machine.
	s := startServer(t, dbURL, map[string]string{
		"PROCESSING_LEASE":   "1s",
		"RECONCILE_INTERVAL": "100ms",
		"REDRIVE_WINDOW":     "3s",
	})
	before := scrape(t, s.client, s.URL+"/metrics")

	// The provider never answers keyP: sent again on every pass within the
	// redrive window, then given up. keyL was charged but its answer lost:
	// the reconciler finds the charge by our key.
	keyP, keyL := newKey(), newKey()
	require.Equal(t, "PROCESSING", s.chargeCard(t, "demo-key", keyP, withPaymentMethod("pm_card_providerError")).Data.ChargeCard.Status)
	require.Equal(t, "PROCESSING", s.chargeCard(t, "demo-key", keyL, withPaymentMethod("pm_card_lostResponse")).Data.ChargeCard.Status)

	var after metricSamples
	require.Eventually(t, func() bool {
		after = scrape(t, s.client, s.URL+"/metrics")
		return after.value("chargeonce_charges_total", "by", "reconciler") == 2
	}, 20*time.Second, 50*time.Millisecond, "the reconciler settles both attempts")
	require.Equal(t, "FAILED", s.chargeStatus(t, "demo-key", keyP).Data.ChargeStatus.Status)
	require.Equal(t, "provider_unavailable", s.chargeStatus(t, "demo-key", keyP).Data.ChargeStatus.Failure.Code)
	require.Equal(t, "SUCCEEDED", s.chargeStatus(t, "demo-key", keyL).Data.ChargeStatus.Status)
	require.Len(t, s.providerCharges(t, "demo", keyL), 1)

	delta := func(name string, labels ...string) float64 {
		return after.value(name, labels...) - before.value(name, labels...)
	}
	redrives := delta("chargeonce_reconciler_redrives_total")
	require.GreaterOrEqual(t, redrives, 1.0, "keyP was sent again within the window")
	requireDeltas(t, before, after, []metricDelta{
		{"chargeonce_charges_total", []string{"outcome", "failed", "by", "reconciler"}, 1},
		{"chargeonce_charges_total", []string{"outcome", "succeeded", "by", "reconciler"}, 1},
		{"chargeonce_charges_total", []string{"by", "request"}, 0},
		{"chargeonce_charge_outcome_unknown_total", nil, 2},
		{"chargeonce_reconciler_give_ups_total", nil, 1},
		// Every pass that took keyP over sent it again or gave it up; keyL
		// was taken over once.
		{"chargeonce_reconciler_takeovers_total", nil, redrives + 2},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "find_charge", "result", "not_found"}, redrives + 1},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "find_charge", "result", "ok"}, 1},
		{"chargeonce_charge_retry_takeovers_total", nil, 0},
	})
	require.Equal(t,
		delta("chargeonce_provider_request_duration_seconds_count", "operation", "create_charge", "result", "unknown"),
		delta("chargeonce_provider_errors_total", "operation", "create_charge"),
		"every unknown outcome is a provider error")
	require.Zero(t, after.value("chargeonce_stuck_processing_attempts"))
}

func TestMetrics_RetentionCountsForgottenKeys(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, map[string]string{
		"KEY_RETENTION":      "1ms",
		"CLEANUP_INTERVAL":   "100ms",
		"RECONCILE_INTERVAL": "1h",
	})
	pool := openPool(t, dbURL)
	before := scrape(t, s.client, s.URL+"/metrics")

	// The PROCESSING attempt expires first, yet is never forgotten; the
	// succeeded and the failed one are.
	keyP, keyS, keyF := newKey(), newKey(), newKey()
	require.Equal(t, "PROCESSING", s.chargeCard(t, "demo-key", keyP, withPaymentMethod("pm_card_providerError")).Data.ChargeCard.Status)
	require.Equal(t, "SUCCEEDED", s.chargeCard(t, "demo-key", keyS, visa(100)).Data.ChargeCard.Status)
	require.Equal(t, "FAILED", s.chargeCard(t, "demo-key", keyF, withPaymentMethod("pm_card_chargeDeclined")).Data.ChargeCard.Status)

	var after metricSamples
	require.Eventually(t, func() bool {
		after = scrape(t, s.client, s.URL+"/metrics")
		return after.value("chargeonce_retention_deleted_total")-before.value("chargeonce_retention_deleted_total") >= 2
	}, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, 2.0, after.value("chargeonce_retention_deleted_total")-before.value("chargeonce_retention_deleted_total"))
	require.Nil(t, s.chargeStatus(t, "demo-key", keyS).Data.ChargeStatus, "keyS is forgotten")
	require.Nil(t, s.chargeStatus(t, "demo-key", keyF).Data.ChargeStatus, "keyF is forgotten")
	require.Equal(t, "PROCESSING", attemptStatus(t, pool, keyP))
	var charges int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM charges").Scan(&charges))
	require.Equal(t, 1, charges, "the charge itself is kept")
}

func TestMetrics_CountRateLimitedAndUnauthenticatedRequests(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Bursts of one, refilled once in 100 s: the second request is refused
	// however slowly the first one runs.
	s := startServer(t, dbURL, map[string]string{
		"RATE_LIMIT_MERCHANT": "0.01", "RATE_LIMIT_MERCHANT_BURST": "1",
		"RATE_LIMIT_IP": "0.01", "RATE_LIMIT_IP_BURST": "1",
	})
	before := scrape(t, s.client, s.URL+"/metrics")
	post := func(headers http.Header, query string, vars map[string]any) rawResponse {
		body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
		require.NoError(t, err)
		return s.send(t, http.MethodPost, "/graphql", headers, bytes.NewReader(body))
	}

	// The merchant's burst is one request; the next is refused.
	withKey := jsonHeaders("Authorization", "Bearer demo-key")
	vars := map[string]any{"key": newKey(), "input": visa(100)}
	require.Equal(t, "SUCCEEDED", post(withKey, chargeCardMutation, vars).gql(t).Data.ChargeCard.Status)
	limited := post(withKey, chargeCardMutation, map[string]any{"key": newKey(), "input": visa(100)})
	require.Equal(t, http.StatusTooManyRequests, limited.status)
	require.Equal(t, "RATE_LIMITED", limited.gql(t).code(t))

	// So is an address's unauthenticated traffic.
	require.Equal(t, "UNAUTHENTICATED", post(jsonHeaders(), chargeStatusQuery, map[string]any{"key": newKey()}).gql(t).code(t))
	limited = post(jsonHeaders(), chargeStatusQuery, map[string]any{"key": newKey()})
	require.Equal(t, http.StatusTooManyRequests, limited.status)
	require.Equal(t, "RATE_LIMITED", limited.gql(t).code(t))

	after := scrape(t, s.client, s.URL+"/metrics")
	requireDeltas(t, before, after, []metricDelta{
		{"chargeonce_rate_limited_total", []string{"scope", "merchant"}, 1},
		{"chargeonce_rate_limited_total", []string{"scope", "ip"}, 1},
		{"chargeonce_unauthenticated_requests_total", nil, 2},
		{"chargeonce_charges_total", nil, 1},
		// Refused before GraphQL: no operation is known.
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "none", "code", "429"}, 2},
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "chargeCard", "code", "200"}, 1},
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "chargeStatus", "code", "200"}, 1},
	})
}

func TestAccessLog_OneLinePerRequestWithRequestID(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// JSON, so that every attribute can be read back exactly.
	s := startServer(t, dbURL, map[string]string{"LOG_FORMAT": "json", "RECONCILE_INTERVAL": "1h"})
	_, acmeKey, err := payment.NewMerchants(openPool(t, dbURL), false).CreateAPIKey(context.Background(), "acme")
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
	devMetrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dev := startServer(t, dbURL, map[string]string{"METRICS_ADDR": devMetrics})
	_, apiKey, err := payment.NewMerchants(openPool(t, dbURL), false).CreateAPIKey(context.Background(), "shop")
	require.NoError(t, err)
	prodMetrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// The real binary, so that everything it writes counts.
	prod := startProcess(t, map[string]string{
		"APP_ENV":      "production",
		"DATABASE_URL": dbURL,
		"PROVIDER_URL": dev.URL + "/provider",
		"METRICS_ADDR": prodMetrics,
	})
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
		require.Equal(t, http.StatusUnprocessableEntity, r.status, query)
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
	require.Equal(t, http.StatusUnprocessableEntity, get.status)
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
		require.Equal(t, http.StatusUnprocessableEntity, r.status, mistake.query)
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
	require.Positive(t, m.value("chargeonce_http_request_duration_seconds_count", "operation", "introspection", "code", "422"))
	resp, err := prod.client.Get("http://" + prodMetrics + "/graphql")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the metrics listener serves only /metrics")
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
	text := startServer(t, dbURL, map[string]string{"APP_ENV": "production", "PROVIDER_URL": dev.URL + "/provider", "LOG_FORMAT": "text"})
	require.Equal(t, "SUCCEEDED", text.chargeCard(t, apiKey, newKey(), visa(100)).Data.ChargeCard.Status)
	requireTextLog(t, text.logText())
}

func TestDevelopment_ListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	other := nonLoopbackIPv4(t)
	dbURL := dbtest.NewDatabase(t)

	dev := startServer(t, dbURL, nil)
	require.True(t, reachable(dev.URL), "loopback")
	require.False(t, reachable(atAddress(t, dev, other)), "development listens on loopback only, not on %s", other)

	everywhere := startServer(t, dbURL, map[string]string{"HOST": "0.0.0.0"})
	require.True(t, reachable(everywhere.URL))
	require.True(t, reachable(atAddress(t, everywhere, other)), "HOST=0.0.0.0 listens on %s too", other)
}

func TestProduction_ListensOnAllInterfaces(t *testing.T) {
	t.Parallel()
	other := nonLoopbackIPv4(t)
	dbURL := dbtest.NewDatabase(t)
	dev := startServer(t, dbURL, nil)
	prod := startServer(t, dbURL, map[string]string{"APP_ENV": "production", "PROVIDER_URL": dev.URL + "/provider"})
	require.True(t, reachable(prod.URL))
	require.True(t, reachable(atAddress(t, prod, other)), "production listens on %s", other)
}

// metricSamples is one scrape: every sample of every metric, by name.
type metricSamples map[string][]metricSample

type metricSample struct {
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrape reads a /metrics endpoint in Prometheus' text format.
func scrape(t *testing.T, client *http.Client, url string) metricSamples {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	samples := metricSamples{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		require.NotNil(t, m, "not a sample: %q", line)
		v, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err, line)
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = p[2]
		}
		samples[m[1]] = append(samples[m[1]], metricSample{labels: labels, value: v})
	}
	return samples
}

// value sums the samples of name that carry the given label pairs; 0 when
// there are none (a labelled counter appears only once it moves).
func (s metricSamples) value(name string, labels ...string) float64 {
	sum := 0.0
next:
	for _, sample := range s[name] {
		for i := 0; i+1 < len(labels); i += 2 {
			if sample.labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		sum += sample.value
	}
	return sum
}

type metricDelta struct {
	name   string
	labels []string
	want   float64
}

// requireDeltas checks how much each metric moved between two scrapes.
func requireDeltas(t *testing.T, before, after metricSamples, deltas []metricDelta) {
	t.Helper()
	for _, d := range deltas {
		got := after.value(d.name, d.labels...) - before.value(d.name, d.labels...)
		require.Equal(t, d.want, got, "%s%v moved by %v, want %v", d.name, d.labels, got, d.want)
	}
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
	require.Contains(t, log, `level=INFO msg="chargeonce listening"`)
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
