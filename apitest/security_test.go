package apitest

import (
	"context"
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
	s := StartOn(t, dbURL, map[string]string{"MAX_BODY_BYTES": "4096"})
	pool := dbtest.Open(t, dbURL)
	auth := func(kv ...string) http.Header {
		return JSONHeaders(append([]string{"Authorization", "Bearer demo-key"}, kv...)...)
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
		{"data after the JSON object", "POST", auth(), ChargeBody(key, inputWithAmount("100")) + ` {"query":"x"}`, 400, "BAD_USER_INPUT", ""},
		{"query is a number", "POST", auth(), `{"query":5}`, 400, "BAD_USER_INPUT", "query"},
		{"variables is a list", "POST", auth(), `{"query":"{__typename}","variables":[1]}`, 400, "BAD_USER_INPUT", "variables"},
		{"document does not parse", "POST", auth(), `{"query":"mutation {"}`, 200, "GRAPHQL_PARSE_FAILED", ""},
		{"unknown operation name", "POST", auth(), `{"query":"query A { __typename }","operationName":"B"}`, 200, "GRAPHQL_VALIDATION_FAILED", ""},
		{"nested too deep", "POST", auth(), `{"query":` + strconv.Quote(deep) + `}`, 200, "GRAPHQL_VALIDATION_FAILED", ""},

		// amount: a JSON integer only.
		{"amount as a string", "POST", auth(), ChargeBody(key, inputWithAmount(`"100"`)), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount with a fraction", "POST", auth(), ChargeBody(key, inputWithAmount("1.5")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount as 100.0", "POST", auth(), ChargeBody(key, inputWithAmount("100.0")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount in exponent form", "POST", auth(), ChargeBody(key, inputWithAmount("1e3")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount of 2^63", "POST", auth(), ChargeBody(key, inputWithAmount("9223372036854775808")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount of 2^62", "POST", auth(), ChargeBody(key, inputWithAmount("4611686018427387904")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount true", "POST", auth(), ChargeBody(key, inputWithAmount("true")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount null", "POST", auth(), ChargeBody(key, inputWithAmount("null")), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount as a string literal", "POST", auth(), literalCharge(key, `{amount: "100", currency: "USD", paymentMethod: "pm_card_visa"}`), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount as a float literal", "POST", auth(), literalCharge(key, `{amount: 1.5, currency: "USD", paymentMethod: "pm_card_visa"}`), 200, "BAD_USER_INPUT", "input.amount"},
		{"amount as a string, variable named otherwise", "POST", auth(), `{"query":"mutation($k: String!, $in: ChargeCardInput!) { chargeCard(idempotencyKey: $k, input: $in) { status } }","variables":{"k":"` + key + `","in":` + inputWithAmount(`"100"`) + `}}`, 200, "BAD_USER_INPUT", "input.amount"},
		{"amount 1.5, variable named otherwise", "POST", auth(), `{"query":"mutation($k: String!, $in: ChargeCardInput!) { chargeCard(idempotencyKey: $k, input: $in) { status } }","variables":{"k":"` + key + `","in":` + inputWithAmount("1.5") + `}}`, 200, "BAD_USER_INPUT", "input.amount"},

		// currency: active ISO 4217 codes only.
		{"currency XXX (no currency)", "POST", auth(), ChargeBody(key, inputWithCurrency("XXX")), 200, "BAD_USER_INPUT", "input.currency"},
		{"currency XTS (testing)", "POST", auth(), ChargeBody(key, inputWithCurrency("XTS")), 200, "BAD_USER_INPUT", "input.currency"},
		{"currency USN (funds code)", "POST", auth(), ChargeBody(key, inputWithCurrency("USN")), 200, "BAD_USER_INPUT", "input.currency"},
		{"currency XAU (gold)", "POST", auth(), ChargeBody(key, inputWithCurrency("XAU")), 200, "BAD_USER_INPUT", "input.currency"},
		{"currency HRK (withdrawn)", "POST", auth(), ChargeBody(key, inputWithCurrency("HRK")), 200, "BAD_USER_INPUT", "input.currency"},

		// Headers.
		{"two Idempotency-Key headers", "POST", auth("Idempotency-Key", key, "Idempotency-Key", "other"), ChargeBody(key, inputWithAmount("100")), 400, "BAD_USER_INPUT", "Idempotency-Key"},
		{"Idempotency-Key header differs from the argument", "POST", auth("Idempotency-Key", "other"), ChargeBody(key, inputWithAmount("100")), 200, "BAD_USER_INPUT", "idempotencyKey"},
		{"two Authorization headers", "POST", JSONHeaders("Authorization", "Bearer demo-key", "Authorization", "Bearer other"), ChargeBody(key, inputWithAmount("100")), 200, "UNAUTHENTICATED", ""},

		// Abuse: one charge per request.
		{"two chargeCard fields in one document", "POST", auth(), twoCharges, 200, "BAD_USER_INPUT", ""},

		// Transport: every refusal is a GraphQL error with a code.
		{"mutation over GET", "GET", http.Header{"Authorization": {"Bearer demo-key"}}, "", 405, "BAD_REQUEST", ""},
		{"text/plain body (a cross-site form)", "POST", http.Header{"Content-Type": {"text/plain"}, "Authorization": {"Bearer demo-key"}}, ChargeBody(key, inputWithAmount("100")), 415, "BAD_REQUEST", "Content-Type"},
		{"form-encoded body", "POST", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "query=" + url.QueryEscape(ChargeCardMutation), 415, "BAD_REQUEST", "Content-Type"},
		{"PUT", "PUT", auth(), ChargeBody(key, inputWithAmount("100")), 405, "BAD_REQUEST", ""},
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
			r := s.Send(t, tt.method, path, tt.headers, strings.NewReader(tt.body))
			require.Equal(t, tt.status, r.Status, "%s", r.Body)
			require.Equal(t, "application/json", r.Header.Get("Content-Type"))
			require.NotEmpty(t, r.Header.Get("X-Request-Id"))
			require.Less(t, len(r.Body), 4096, "a short answer")
			for _, leak := range []string{"RawParams", "graphql.", "json:", "Go ", "tcp ", strings.Repeat("x", 64)} {
				require.NotContains(t, string(r.Body), leak, "no internals, no echo")
			}
			g := r.GQL(t)
			require.NotEmpty(t, g.Errors)
			require.Nil(t, g.Data.ChargeCard)
			require.Equal(t, tt.code, g.Errors[0].Extensions["code"], "%s", r.Body)
			require.NotEmpty(t, g.Errors[0].Message)
			if tt.field != "" {
				require.Equal(t, tt.field, g.Errors[0].Extensions["field"], "%s", r.Body)
				if _, name, ok := strings.Cut(tt.field, "."); ok {
					require.Contains(t, g.Errors[0].Message, name, "the message names the field")
				}
			}
		})
	}

	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM charge_attempts").Scan(&attempts))
	charges, err := s.API("").ListProviderCharges(context.Background(), apiclient.ProviderChargeFilter{})
	require.NoError(t, err)
	require.Zero(t, attempts, "nothing was claimed")
	require.Empty(t, charges, "nothing reached the card provider")
	require.NotContains(t, s.LogText(), "level=ERROR", "a client's mistakes are not the server's errors")

	// The same server still charges a good request, JPY (no minor units) included.
	ok := s.Send(t, "POST", "/graphql", auth(), strings.NewReader(ChargeBody(key, `{"amount":500,"currency":"JPY","paymentMethod":"pm_card_visa"}`))).GQL(t)
	require.Empty(t, ok.Errors)
	require.Equal(t, "SUCCEEDED", ok.Data.ChargeCard.Status)
}
