package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// websocketHeaders are a graphql-transport-ws handshake's, with more
// key/value pairs that replace them.
func websocketHeaders(kv ...string) http.Header {
	h := http.Header{}
	kv = append([]string{"Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Version", "13",
		"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol", "graphql-transport-ws",
		"Authorization", "Bearer demo-key"}, kv...)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// chargeBody is a chargeCard request body whose input is the raw JSON given,
// so that a test can send what no JSON encoder would.
func chargeBody(key, rawInput string) string {
	return `{"query":` + strconv.Quote(chargeCardMutation) + `,"variables":{"key":` + strconv.Quote(key) + `,"input":` + rawInput + `}}`
}

// inputWithAmount is a valid input but for the raw JSON amount.
func inputWithAmount(rawAmount string) string {
	return `{"amount":` + rawAmount + `,"currency":"USD","paymentMethod":"pm_card_visa"}`
}

func inputWithCurrency(currency string) string {
	return `{"amount":100,"currency":` + strconv.Quote(currency) + `,"paymentMethod":"pm_card_visa"}`
}

// literalCharge is a chargeCard document with the input written in the query.
func literalCharge(key, input string) string {
	q := `mutation { chargeCard(idempotencyKey: ` + strconv.Quote(key) + `, input: ` + input + `) { status } }`
	return `{"query":` + strconv.Quote(q) + `}`
}

// TestHostileInput_IsRefusedAndNothingIsStoredOrCharged sends every hostile
// or malformed request the hardening issue lists to the real HTTP endpoint.
// Each gets its answer as a GraphQL error with an extensions.code, in a
// short body that quotes none of the input and names no Go type; none of
// them stores an attempt or reaches the card provider.
func TestHostileInput_IsRefusedAndNothingIsStoredOrCharged(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, map[string]string{"MAX_BODY_BYTES": "4096"})
	pool := dbtest.Open(t, dbURL)
	auth := func(kv ...string) http.Header {
		return jsonHeaders(append([]string{"Authorization", "Bearer demo-key"}, kv...)...)
	}
	key := "hostile-key" // every charge below uses it: none may claim it
	big := `{"query":"` + strings.Repeat("x", 5000) + `"}`
	twoCharges := `{"query":"mutation { a: chargeCard(idempotencyKey: \"k1\", input: {amount: 100, currency: \"USD\", paymentMethod: \"pm_card_visa\"}) { status } b: chargeCard(idempotencyKey: \"k2\", input: {amount: 100, currency: \"USD\", paymentMethod: \"pm_card_visa\"}) { status } }"}`
	deep := "{ __schema { types { fields { type { " + strings.Repeat("ofType { ", 14) + "name" + strings.Repeat(" }", 14+5)

	tests := []struct {
		name    string
		method  string
		headers http.Header
		body    string
		status  int
		code    string
		field   string
	}{
		// The body: size and shape.
		{"body over MAX_BODY_BYTES", "POST", auth(), big, 413, "REQUEST_TOO_LARGE", ""},
		{"empty body", "POST", auth(), "", 400, "BAD_USER_INPUT", ""},
		{"malformed JSON", "POST", auth(), `{"query":"mutation { chargeCard`, 400, "BAD_USER_INPUT", ""},
		{"body is a list", "POST", auth(), `[]`, 400, "BAD_USER_INPUT", ""},
		{"body is null", "POST", auth(), `null`, 400, "BAD_USER_INPUT", ""},
		{"data after the JSON object", "POST", auth(), chargeBody(key, inputWithAmount("100")) + ` {"query":"x"}`, 400, "BAD_USER_INPUT", ""},
		{"query is a number", "POST", auth(), `{"query":5}`, 400, "BAD_USER_INPUT", "query"},
		{"variables is a list", "POST", auth(), `{"query":"{__typename}","variables":[1]}`, 400, "BAD_USER_INPUT", "variables"},
		{"document does not parse", "POST", auth(), `{"query":"mutation {"}`, 200, "GRAPHQL_PARSE_FAILED", ""},
		{"unknown operation name", "POST", auth(), `{"query":"query A { __typename }","operationName":"B"}`, 200, "GRAPHQL_VALIDATION_FAILED", ""},
		{"nested too deep", "POST", auth(), `{"query":` + strconv.Quote(deep) + `}`, 200, "GRAPHQL_VALIDATION_FAILED", ""},

		// amount: a JSON integer only.
		{"amount as a string", "POST", auth(), chargeBody(key, inputWithAmount(`"100"`)), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount with a fraction", "POST", auth(), chargeBody(key, inputWithAmount("1.5")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount as 100.0", "POST", auth(), chargeBody(key, inputWithAmount("100.0")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount in exponent form", "POST", auth(), chargeBody(key, inputWithAmount("1e3")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount of 2^63", "POST", auth(), chargeBody(key, inputWithAmount("9223372036854775808")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount of 2^62", "POST", auth(), chargeBody(key, inputWithAmount("4611686018427387904")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount true", "POST", auth(), chargeBody(key, inputWithAmount("true")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount null", "POST", auth(), chargeBody(key, inputWithAmount("null")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount as a string literal", "POST", auth(), literalCharge(key, `{amount: "100", currency: "USD", paymentMethod: "pm_card_visa"}`), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount as a float literal", "POST", auth(), literalCharge(key, `{amount: 1.5, currency: "USD", paymentMethod: "pm_card_visa"}`), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount as a string, variable named otherwise", "POST", auth(), `{"query":"mutation($k: String!, $in: ChargeCardInput!) { chargeCard(idempotencyKey: $k, input: $in) { status } }","variables":{"k":"` + key + `","in":` + inputWithAmount(`"100"`) + `}}`, 200, "BAD_USER_INPUT", "input.amount"},
		{"amount 1.5, variable named otherwise", "POST", auth(), `{"query":"mutation($k: String!, $in: ChargeCardInput!) { chargeCard(idempotencyKey: $k, input: $in) { status } }","variables":{"k":"` + key + `","in":` + inputWithAmount("1.5") + `}}`, 200, "BAD_USER_INPUT", "input.amount"},

		// currency: active ISO 4217 codes only.
		{"currency XXX (no currency)", "POST", auth(), chargeBody(key, inputWithCurrency("XXX")), 200, "BAD_USER_INPUT", "input.currency"},
		{"currency XTS (testing)", "POST", auth(), chargeBody(key, inputWithCurrency("XTS")), 200, "BAD_USER_INPUT", "input.currency"},
		{"currency USN (funds code)", "POST", auth(), chargeBody(key, inputWithCurrency("USN")), 200, "BAD_USER_INPUT", "input.currency"},
		{"currency XAU (gold)", "POST", auth(), chargeBody(key, inputWithCurrency("XAU")), 200, "BAD_USER_INPUT", "input.currency"},
		{"currency HRK (withdrawn)", "POST", auth(), chargeBody(key, inputWithCurrency("HRK")), 200, "BAD_USER_INPUT", "input.currency"},

		// Headers.
		{"two Idempotency-Key headers", "POST", auth("Idempotency-Key", key, "Idempotency-Key", "other"), chargeBody(key, inputWithAmount("100")), 400, "BAD_USER_INPUT", "Idempotency-Key"},
		{"Idempotency-Key header differs from the argument", "POST", auth("Idempotency-Key", "other"), chargeBody(key, inputWithAmount("100")), 200, "BAD_USER_INPUT", "idempotencyKey"},
		{"two Authorization headers", "POST", jsonHeaders("Authorization", "Bearer demo-key", "Authorization", "Bearer other"), chargeBody(key, inputWithAmount("100")), 200, "UNAUTHENTICATED", ""},

		// Abuse: one charge per request.
		{"two chargeCard fields in one document", "POST", auth(), twoCharges, 200, "BAD_USER_INPUT", ""},

		// Transport: every refusal is a GraphQL error with a code.
		{"mutation over GET", "GET", http.Header{"Authorization": {"Bearer demo-key"}}, "", 405, "BAD_REQUEST", ""},
		{"text/plain body (a cross-site form)", "POST", http.Header{"Content-Type": {"text/plain"}, "Authorization": {"Bearer demo-key"}}, chargeBody(key, inputWithAmount("100")), 415, "BAD_REQUEST", "Content-Type"},
		{"form-encoded body", "POST", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "query=" + url.QueryEscape(chargeCardMutation), 415, "BAD_REQUEST", "Content-Type"},
		{"PUT", "PUT", auth(), chargeBody(key, inputWithAmount("100")), 405, "BAD_REQUEST", ""},
		{"websocket without graphql-transport-ws", "GET", websocketHeaders("Sec-WebSocket-Protocol", "graphql-ws"), "", 400, "BAD_REQUEST", "Sec-WebSocket-Protocol"},
		{"websocket from another site with a secret key", "GET", websocketHeaders("Origin", "https://evil.example"), "", 403, "FORBIDDEN", "Authorization"},
		{"websocket from an unregistered site, key to come", "GET", websocketHeaders("Origin", "https://evil.example", "Authorization", ""), "", 403, "BAD_REQUEST", "Origin"},
		{"websocket over POST", "POST", websocketHeaders(), "", 405, "BAD_REQUEST", ""},
		{"another protocol upgrade (h2c)", "GET", http.Header{"Upgrade": {"h2c"}, "Connection": {"Upgrade"}}, "", 400, "BAD_REQUEST", "Upgrade"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/graphql"
			if tt.name == "mutation over GET" {
				path += "?query=" + url.QueryEscape(`mutation { chargeCard(idempotencyKey: "`+key+`", input: {amount: 100, currency: "USD", paymentMethod: "pm_card_visa"}) { status } }`)
			}
			r := s.send(t, tt.method, path, tt.headers, strings.NewReader(tt.body))
			require.Equal(t, tt.status, r.status, "%s", r.body)
			require.Equal(t, "application/json", r.header.Get("Content-Type"))
			require.NotEmpty(t, r.header.Get("X-Request-Id"))
			require.Less(t, len(r.body), 4096, "a short answer")
			for _, leak := range []string{"RawParams", "graphql.", "json:", "Go ", "tcp ", strings.Repeat("x", 64)} {
				require.NotContains(t, string(r.body), leak, "no internals, no echo")
			}
			g := r.gql(t)
			require.NotEmpty(t, g.Errors)
			require.Nil(t, g.Data.ChargeCard)
			require.Equal(t, tt.code, g.Errors[0].Extensions["code"], "%s", r.body)
			require.NotEmpty(t, g.Errors[0].Message)
			if tt.field != "" {
				require.Equal(t, tt.field, g.Errors[0].Extensions["field"], "%s", r.body)
				if _, name, ok := strings.Cut(tt.field, "."); ok {
					require.Contains(t, g.Errors[0].Message, name, "the message names the field")
				}
			}
		})
	}

	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM charge_attempts").Scan(&attempts))
	charges, err := s.api("").ListProviderCharges(context.Background(), apiclient.ProviderChargeFilter{})
	require.NoError(t, err)
	require.Zero(t, attempts, "nothing was claimed")
	require.Empty(t, charges, "nothing reached the card provider")
	require.NotContains(t, s.logText(), "level=ERROR", "a client's mistakes are not the server's errors")

	// The same server still charges a good request, JPY (no minor units) included.
	ok := s.send(t, "POST", "/graphql", auth(), strings.NewReader(chargeBody(key, `{"amount":500,"currency":"JPY","paymentMethod":"pm_card_visa"}`))).gql(t)
	require.Empty(t, ok.Errors)
	require.Equal(t, "SUCCEEDED", ok.Data.ChargeCard.Status)
}

// TestAliasFlood_OneRequestChargesAtMostOnce sends the document of
// 100 aliased chargeCard fields, each with its own key, and the same through
// fragments: it is refused as a whole, and nothing is claimed or charged.
func TestAliasFlood_OneRequestChargesAtMostOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, nil)
	pool := dbtest.Open(t, dbURL)
	var doc strings.Builder
	doc.WriteString("mutation {")
	for i := range 100 {
		fmt.Fprintf(&doc, ` c%d: chargeCard(idempotencyKey: "flood-%d", input: {amount: 100, currency: "USD", paymentMethod: "pm_card_visa"}) { status }`, i, i)
	}
	doc.WriteString(" }")
	viaFragments := `mutation { ...A ...B } fragment A on Mutation { a: chargeCard(idempotencyKey: "frag-a", input: {amount: 100, currency: "USD", paymentMethod: "pm_card_visa"}) { status } } fragment B on Mutation { b: chargeCard(idempotencyKey: "frag-b", input: {amount: 100, currency: "USD", paymentMethod: "pm_card_visa"}) { status } }`
	for name, query := range map[string]string{"100 aliases": doc.String(), "two fragments": viaFragments} {
		body, err := json.Marshal(map[string]string{"query": query})
		require.NoError(t, err)
		g := s.send(t, "POST", "/graphql", jsonHeaders("Authorization", "Bearer demo-key"), bytes.NewReader(body)).gql(t)
		require.Len(t, g.Errors, 1, name)
		require.Equal(t, "BAD_USER_INPUT", g.Errors[0].Extensions["code"], name)
		require.Contains(t, g.Errors[0].Message, "at most 1", name)
	}
	// A skipped second field does not run, so it does not count.
	skipped := `mutation { a: chargeCard(idempotencyKey: "skip-a", input: {amount: 100, currency: "USD", paymentMethod: "pm_card_visa"}) { status } b: chargeCard(idempotencyKey: "skip-b", input: {amount: 100, currency: "USD", paymentMethod: "pm_card_visa"}) @skip(if: true) { status } }`
	body, err := json.Marshal(map[string]string{"query": skipped})
	require.NoError(t, err)
	g := s.send(t, "POST", "/graphql", jsonHeaders("Authorization", "Bearer demo-key"), bytes.NewReader(body)).gql(t)
	require.Empty(t, g.Errors)

	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM charge_attempts WHERE idempotency_key <> 'skip-a'").Scan(&attempts))
	charges, err := s.api("").ListProviderCharges(context.Background(), apiclient.ProviderChargeFilter{})
	require.NoError(t, err)
	require.Zero(t, attempts, "no key of a refused document was claimed")
	require.Len(t, charges, 1, "only the one charge that ran")
}

// TestCrossOrigin_UnregisteredOriginsGetNoAccess: a page on an origin no
// merchant registered can neither pass a preflight (needed for the
// Authorization header and a JSON body) nor read an answer, and a secret
// key gets no CORS headers from any origin; the cross-site forms a browser
// sends without a preflight are refused (see the text/plain and
// form-encoded cases above). Registered origins: checkout_test.go.
func TestCrossOrigin_UnregisteredOriginsGetNoAccess(t *testing.T) {
	t.Parallel()
	s := startServer(t, dbtest.NewDatabase(t), nil)
	preflight := s.send(t, "OPTIONS", "/graphql", http.Header{
		"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {"authorization, content-type"},
	}, nil)
	post := s.send(t, "POST", "/graphql", jsonHeaders("Origin", "https://evil.example", "Authorization", "Bearer demo-key"),
		strings.NewReader(`{"query":"{ __typename }"}`))
	// The preflight is refused; so is the POST (a browser sends one that
	// needs no preflight), which a secret key sends from another origin.
	require.Equal(t, http.StatusForbidden, preflight.status)
	require.Equal(t, "FORBIDDEN", preflight.gql(t).Errors[0].Extensions["code"])
	require.Equal(t, http.StatusForbidden, post.status)
	require.Equal(t, "FORBIDDEN", post.gql(t).Errors[0].Extensions["code"])
	for name, r := range map[string]rawResponse{"preflight": preflight, "POST": post} {
		for h := range r.header {
			require.False(t, strings.HasPrefix(strings.ToLower(h), "access-control-allow"), "%s: %s", name, h)
		}
	}
}
