package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/merchant"
	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
)

// requestMembers are the members of a POST body that DecodeRequest reads, in
// the order it checks them.
var requestMembers = []string{"query", "operationName", "variables", "extensions"}

// fixedMessages are every answer DecodeRequest may give: none quotes the input.
var fixedMessages = []string{decodeMessage,
	"query must be a string", "operationName must be a string",
	"variables must be a JSON object", "extensions must be a JSON object"}

// goTerms are words of Go's and encoding/json's own error messages.
var goTerms = []string{"RawParams", "json:", "json.", "Go value", "Go struct", "unmarshal", "interface {}", "map[", "[]"}

func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"query":"{ __typename }"}`,
		`{"query":"query Q($k:String!){chargeStatus(idempotencyKey:$k){status}}","operationName":"Q","variables":{"k":"a"},"extensions":{"persistedQuery":{"version":1}}}`,
		`{"query":"mutation($key:String!,$input:ChargeCardInput!){chargeCard(idempotencyKey:$key,input:$input){status}}","variables":{"key":"k","input":{"amount":1999,"currency":"USD","paymentMethod":"pm_card_visa"}}}`,
		`{"query":null,"operationName":null,"variables":null,"extensions":null}`,
		`{}`, ` {"query" : "x"} `, `[]`, `null`, `"x"`, `5`, `true`,
		`{"query":5}`, `{"query":["x"]}`, `{"extensions":1,"variables":1,"operationName":1,"query":1}`, `{"operationName":{}}`, `{"variables":[]}`, `{"variables":"x"}`, `{"extensions":1}`,
		`{"query":"x"} trailing`, `{"query":"x"}{"query":"y"}`, `{"query":"x"`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"variables":{"a":` + strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat("}", 200) + `}}`,
		`{"variables":{"n":123456789012345678901234567890,"f":1e999,"m":-0.0}}`,
		"{\"query\":\"\xff\xfe\"}", "\xef\xbb\xbf{\"query\":\"x\"}", `{"query":"\ud800"}`,
		`{"Query":"x","QUERY":"y"}`, `{"query":"a","query":"b"}`,
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		params, err := DecodeRequest(body)
		ref, field, ok := referenceDecode(body)
		if err != nil {
			var rerr *RequestError
			if !errors.As(err, &rerr) {
				t.Fatalf("error %v (%T) is not a *RequestError", err, err)
			}
			if rerr.Code != codeBadUserInput || !slices.Contains(append([]string{""}, requestMembers...), rerr.Field) {
				t.Fatalf("error %+v: want code %s and a field among query, operationName, variables, extensions", rerr, codeBadUserInput)
			}
			requireFixedMessage(t, rerr.Message, body)
			if ok {
				t.Fatalf("refused a GraphQL request: %v", rerr)
			}
			if rerr.Field != field {
				t.Fatalf("error names %q; the first offending member is %q", rerr.Field, field)
			}
			return
		}
		if !ok {
			t.Fatalf("accepted a body that is not a GraphQL request (want an error about %q)", field)
		}
		// What encoding/json makes of the same body, member by member.
		for name, got := range map[string]string{"query": params.Query, "operationName": params.OperationName} {
			want, _ := json.Marshal(ref[name]) // null when absent or null
			if ref[name] == nil {
				want, _ = json.Marshal("")
			}
			if have, _ := json.Marshal(got); !bytes.Equal(have, want) {
				t.Fatalf("%s is %s; encoding/json reads %s", name, have, want)
			}
		}
		for name, got := range map[string]map[string]any{"variables": params.Variables, "extensions": params.Extensions} {
			want, _ := ref[name].(map[string]any)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s is %#v; encoding/json reads %#v", name, got, want)
			}
		}
	})
}

// BenchmarkDecodeRequest decodes the body of a checkout's chargeCard, as
// the bench sends it: the work each charge and each replay does before
// gqlgen sees the request (make bench-go).
func BenchmarkDecodeRequest(b *testing.B) {
	body := []byte(`{"operationName":"ChargeCardBrief","query":"\nmutation ChargeCardBrief ($idempotencyKey: String!, $input: ChargeCardInput!) {\n\tchargeCard(idempotencyKey: $idempotencyKey, input: $input) {\n\t\tstatus\n\t}\n}\n","variables":{"idempotencyKey":"0b7a9f3e-8f5e-4e55-9d2b-58a4c6d2e9f1","input":{"amount":1999,"currency":"USD","paymentMethod":"pm_card_visa"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		params, err := DecodeRequest(body)
		if err != nil || params.OperationName != "ChargeCardBrief" || len(params.Variables) != 2 {
			b.Fatalf("DecodeRequest: %+v, %v", params, err)
		}
	}
}

// referenceDecode is what a GraphQL-over-HTTP body is, decided with
// encoding/json alone: exactly one JSON object, whose query and
// operationName are strings, and variables and extensions objects, when
// present and not null. When the body is not one, field names the first
// offending member, or is "" when the body is not a JSON object at all.
func referenceDecode(body []byte) (ref map[string]any, field string, ok bool) {
	if !json.Valid(body) {
		return nil, "", false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "", false
	}
	obj, isObject := v.(map[string]any)
	if !isObject {
		return nil, "", false
	}
	for _, name := range requestMembers {
		m, present := obj[name]
		if !present || m == nil {
			continue
		}
		var isString, isObject bool
		switch m.(type) {
		case string:
			isString = true
		case map[string]any:
			isObject = true
		}
		if (name == "query" || name == "operationName") && !isString || (name == "variables" || name == "extensions") && !isObject {
			return nil, name, false
		}
	}
	return obj, "", true
}

// requireFixedMessage checks that msg is one of the fixed answers: it quotes
// none of the body and names no Go type.
func requireFixedMessage(t *testing.T, msg string, body []byte) {
	t.Helper()
	if msg == "" {
		t.Fatal("an error without a message")
	}
	for _, term := range goTerms {
		if strings.Contains(msg, term) && !strings.Contains(decodeMessage, term) {
			t.Fatalf("message %q speaks Go (%q)", msg, term)
		}
	}
	// A body a fixed message happens to contain ("query", "{") proves nothing.
	if len(body) > 3 && strings.Contains(msg, string(body)) && !slices.ContainsFunc(fixedMessages, func(m string) bool {
		return strings.Contains(m, string(body))
	}) {
		t.Fatalf("message %q quotes the request body", msg)
	}
	if !slices.Contains(fixedMessages, msg) {
		t.Fatalf("message %q is not one of the fixed answers", msg)
	}
}

// chargeMutation is the checkout's standard operation.
const chargeMutation = `mutation($key:String!,$input:ChargeCardInput!){chargeCard(idempotencyKey:$key,input:$input){status replayed}}`

// FuzzChargeCard sends chargeCard through the whole /graphql handler, on a
// real PostgreSQL, with the real payment service and the simulated provider
// over HTTP. Whatever the key and input, the answer is JSON with HTTP 200,
// 400 or 422; never INTERNAL_SERVER_ERROR; an error names its field and
// stores nothing; a success has a status.
//
// The database lives as long as the fuzz target, so inputs meet each other's
// keys and orders: IDEMPOTENCY_KEY_REUSED (the key is stored with another
// request) and ORDER_ALREADY_PAID (the order has a live attempt or a charge)
// are right answers then, and only then; the database is asked which.
func FuzzChargeCard(f *testing.F) {
	type seed struct{ key, amount, currency, paymentMethod, orderID string }
	for _, s := range []seed{
		{"fz-8e03978e-40d5-43e8-bc93-6894a57f9324", "1999", "USD", "pm_card_visa", ""},
		{"fz-8e03978e-40d5-43e8-bc93-6894a57f9324", "1999", "USD", "pm_card_visa", ""}, // a replay
		{"fz-8e03978e-40d5-43e8-bc93-6894a57f9324", "2000", "USD", "pm_card_visa", ""}, // key reused
		{"fz-order-1", "500", "EUR", "pm_card_mastercard", "order-1"},
		{"fz-order-2", "500", "EUR", "pm_card_visa", "order-1"}, // order paid
		{"fz-declined", "1", "JPY", "pm_card_chargeDeclined", "order-2"},
		{"fz-slow", "99999999", "KWD", "pm_card_slow", ""},
		{"fz-lost", "100", "USD", "pm_card_lostResponse", ""},
		{"fz-5xx", "100", "USD", "pm_card_providerError", ""},
		{"fz-unknown-card", "100", "USD", "pm_card_unknown", ""},
		{"fz-amount-string", `"100"`, "USD", "pm_card_visa", ""},
		{"fz-amount-fraction", "1.5", "USD", "pm_card_visa", ""},
		{"fz-amount-exponent", "1e3", "USD", "pm_card_visa", ""},
		{"fz-amount-huge", "9223372036854775808", "USD", "pm_card_visa", ""},
		{"fz-amount-odd", "true", "USD", "pm_card_visa", ""},
		{"fz-amount-null", "null", "USD", "pm_card_visa", ""},
		{"fz-amount-object", "{}", "USD", "pm_card_visa", ""},
		{"fz-amount-zero", "0", "XTS", "pm_card_visa", ""},
		{"fz-currency", "100", "usd", "pm-card", "a\nb"},
		{"fz-not-json", "1}", "USD", "pm_card_visa", ""},
		{"", "100", "USD", "pm_card_visa", ""},
		{"a b\x00\xff", "100", "USD", "pm_card_visa", ""},
	} {
		f.Add(s.key, s.amount, s.currency, s.paymentMethod, s.orderID)
	}

	// Built once for the target, not per input.
	pool := dbtest.NewPool(f, cardsimtest.Schema)
	sim := cardsimtest.Start(f, pool, cardsimtest.Options{SlowDelay: time.Millisecond})
	svc := payment.NewService(pool, simprovider.New(sim.URL, 5*time.Second, nil), payment.Config{
		// An unknown outcome (pm_card_lostResponse, pm_card_providerError)
		// answers PROCESSING after one quick retry, not after seconds.
		ProviderRetries: 1, ProviderRetryBudget: 20 * time.Millisecond,
	})
	merchants := merchant.New(pool, true)
	if _, err := merchants.EnsureDevelopmentKey(context.Background(), "demo", "demo-key", merchant.KeySecret); err != nil {
		f.Fatal(err)
	}
	// No limiters: rate limits are not what this target is about.
	h := NewHandler(&Resolver{Payments: svc, Merchants: merchants}, HandlerConfig{})

	f.Fuzz(func(t *testing.T, key, amount, currency, paymentMethod, orderID string) {
		body := []byte(`{"query":` + jsonString(chargeMutation) + `,"variables":{"key":` + jsonString(key) +
			`,"input":{"amount":` + amount + `,"currency":` + jsonString(currency) +
			`,"paymentMethod":` + jsonString(paymentMethod) + `,"orderId":` + jsonString(orderID) + `}}}`)
		// The strings as the server reads them: JSON carries no invalid UTF-8.
		serverKey, serverOrder := serverString(key), serverString(orderID)
		before := countAttempts(t, pool, serverKey)
		orderTaken := orderIsTaken(t, pool, serverOrder)

		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer demo-key")
		req.RemoteAddr = "192.0.2.1:4321"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		var resp struct {
			Data *struct {
				ChargeCard *struct {
					Status   string `json:"status"`
					Replayed bool   `json:"replayed"`
				} `json:"chargeCard"`
			} `json:"data"`
			Errors []struct {
				Message    string `json:"message"`
				Extensions struct {
					Code  string `json:"code"`
					Field string `json:"field"`
				} `json:"extensions"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("HTTP %d: the answer is not JSON (%v): %q", rec.Code, err, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		after := countAttempts(t, pool, serverKey)

		// A token that is not one JSON value may have closed the variables
		// and written other members; then only the general rules hold.
		standard := json.Valid([]byte(amount))
		switch {
		case len(body) > MaxBodyBytesDefault:
			if rec.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("a body of %d bytes: HTTP %d", len(body), rec.Code)
			}
		case !json.Valid(body):
			// The amount broke the JSON: refused before anything runs.
			if rec.Code != http.StatusBadRequest || len(resp.Errors) != 1 || resp.Errors[0].Extensions.Code != codeBadUserInput {
				t.Fatalf("a body that is not JSON: HTTP %d %s", rec.Code, rec.Body)
			}
		case rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest && rec.Code != http.StatusUnprocessableEntity:
			t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
		}

		if standard && json.Valid(body) && len(body) <= MaxBodyBytesDefault {
			// What must be refused, in the order it is checked: the amount's
			// type as the variables are read, then the key, then the input.
			want := ""
			n, isInt := jsonInt64(amount)
			switch {
			case !isInt:
				want = "input.amount"
			case payment.ValidateKey(serverKey) != nil:
				want = "idempotencyKey"
			case n < payment.MinAmount || n > payment.MaxAmount:
				want = "input.amount"
			}
			if want != "" && (len(resp.Errors) != 1 || resp.Errors[0].Extensions.Code != codeBadUserInput || resp.Errors[0].Extensions.Field != want) {
				t.Fatalf("want one BAD_USER_INPUT about %s: HTTP %d %s", want, rec.Code, rec.Body)
			}
		}
		for _, e := range resp.Errors {
			code, field := e.Extensions.Code, e.Extensions.Field
			switch code {
			case codeBadUserInput:
				if standard && json.Valid(body) && !slices.Contains(chargeFields, field) {
					t.Fatalf("BAD_USER_INPUT about %q, not one of %q: %s", field, chargeFields, rec.Body)
				}
			case "IDEMPOTENCY_KEY_REUSED":
				if field != "idempotencyKey" || standard && before.n != 1 {
					t.Fatalf("IDEMPOTENCY_KEY_REUSED (field %q) for a key stored %d times: %s", field, before.n, rec.Body)
				}
			case "ORDER_ALREADY_PAID":
				if field != "input.orderId" || standard && !orderTaken {
					t.Fatalf("ORDER_ALREADY_PAID (field %q) for order %q, which was free: %s", field, serverOrder, rec.Body)
				}
			case "REQUEST_TOO_LARGE":
				if len(body) <= MaxBodyBytesDefault {
					t.Fatalf("REQUEST_TOO_LARGE for %d bytes", len(body))
				}
			default:
				t.Fatalf("error code %q: %s", code, rec.Body)
			}
			if e.Message == "" {
				t.Fatalf("an error without a message: %s", rec.Body)
			}
			for _, term := range []string{"interface {}", "map[", "json.", "Go value", "RawParams", "payment:", "pgx", "SQLSTATE"} {
				if strings.Contains(e.Message, term) {
					t.Fatalf("message %q speaks Go or SQL (%q)", e.Message, term)
				}
			}
		}
		if len(resp.Errors) > 0 {
			if after != before {
				t.Fatalf("an error answer stored something: attempts %+v before, %+v after: %s", before, after, rec.Body)
			}
			return
		}
		if rec.Code != http.StatusOK || resp.Data == nil || (standard && resp.Data.ChargeCard == nil) {
			t.Fatalf("HTTP %d, no errors and no chargeCard: %s", rec.Code, rec.Body)
		}
		if c := resp.Data.ChargeCard; c != nil {
			if c.Status != "SUCCEEDED" && c.Status != "FAILED" && c.Status != "PROCESSING" {
				t.Fatalf("status %q", c.Status)
			}
			if after.all != before.all && after.all != before.all+1 || standard && after.n != 1 {
				t.Fatalf("a charge answered %s left attempts %+v before, %+v after", c.Status, before, after)
			}
		}
	})
}

// chargeFields are the inputs a BAD_USER_INPUT about chargeCard may name.
var chargeFields = []string{"idempotencyKey", "input.amount", "input.currency", "input.paymentMethod", "input.orderId", "input.description"}

var jsonInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// jsonInt64 reads a JSON token as GraphQL reads an Int variable: an integer
// literal, without fraction or exponent, that fits 64 bits.
func jsonInt64(token string) (int64, bool) {
	token = strings.Trim(token, " \t\r\n")
	if !jsonInteger.MatchString(token) {
		return 0, false
	}
	n, err := strconv.ParseInt(token, 10, 64)
	return n, err == nil
}

type attemptCount struct {
	all int // every attempt
	n   int // the key's, when the key can be PostgreSQL text
}

// countAttempts counts the stored attempts, and those of key. A key that is
// not valid text for PostgreSQL (NUL) is never stored; only the total is counted.
func countAttempts(t *testing.T, pool *pgxpool.Pool, key string) attemptCount {
	t.Helper()
	ctx := context.Background()
	var c attemptCount
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM charge_attempts`).Scan(&c.all); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(key, 0) {
		return c
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM charge_attempts WHERE idempotency_key = $1`, key).Scan(&c.n); err != nil {
		t.Fatal(err)
	}
	return c
}

// orderIsTaken reports whether order has a charge, or an attempt that is
// running or succeeded: what makes a new payment of it ORDER_ALREADY_PAID.
func orderIsTaken(t *testing.T, pool *pgxpool.Pool, order string) bool {
	t.Helper()
	if order == "" || strings.ContainsRune(order, 0) {
		return false
	}
	var taken bool
	err := pool.QueryRow(context.Background(), `SELECT
		EXISTS (SELECT 1 FROM charges WHERE order_id = $1) OR
		EXISTS (SELECT 1 FROM charge_attempts WHERE order_id = $1 AND status <> 'FAILED')`, order).Scan(&taken)
	if err != nil {
		t.Fatal(err)
	}
	return taken
}

func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// serverString is s as the server decodes it from jsonString(s).
func serverString(s string) string {
	var out string
	_ = json.Unmarshal([]byte(jsonString(s)), &out)
	return out
}
