package app

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/merchant"
	"chargeonce/provider/stripe/stripefake"
)

// setup starts one server on a fresh database.
func setup(t *testing.T) (*testServer, string) {
	t.Helper()
	dbURL := dbtest.NewDatabase(t)
	return startServer(t, dbURL, nil), dbURL
}

func TestChargeCard_SameKeyConcurrently_ChargesOnce(t *testing.T) {
	t.Parallel()
	for _, pm := range []string{"pm_card_visa", "pm_card_slow"} {
		t.Run(pm, func(t *testing.T) {
			t.Parallel()
			s, _ := setup(t)
			key, input := newKey(), withPaymentMethod(pm)
			requireOneCharge(t, s, key, input, storm(t, []*testServer{s}, 200, key, input))
		})
	}
}

func TestChargeCard_SameKeyAcrossTwoInstances_ChargesOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	a, b := startServer(t, dbURL, nil), startServer(t, dbURL, nil)
	key, input := newKey(), withPaymentMethod("pm_card_slow")
	responses := storm(t, []*testServer{a, b}, 200, key, input)
	requireOneCharge(t, a, key, input, responses)
	require.Equal(t, 1, len(b.providerCharges(t, "demo", key)))
}

func TestChargeCard_Replay_ReturnsStoredCharge(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	key := newKey()
	input := visa(4250)
	input.OrderId = new("order-17")

	first := s.chargeCard(t, "demo-key", key, input)
	require.Empty(t, first.Errors)
	p := first.Data.ChargeCard
	require.Equal(t, "SUCCEEDED", p.Status)
	require.False(t, p.Replayed)
	require.Equal(t, key, p.IdempotencyKey)
	require.Equal(t, 4250, p.Charge.Amount)
	require.Equal(t, "USD", p.Charge.Currency)
	require.Equal(t, "order-17", *p.Charge.OrderId)
	require.True(t, strings.HasPrefix(p.Charge.ProviderChargeId, "ch_"))
	require.NotNil(t, p.ExpiresAt)
	require.Nil(t, p.RetryAfterMs)
	require.Nil(t, p.Failure)

	second := s.chargeCard(t, "demo-key", key, input)
	require.Empty(t, second.Errors)
	r := second.Data.ChargeCard
	require.True(t, r.Replayed)
	require.Equal(t, *p.Charge, *r.Charge, "the replay carries the identical charge")
	require.Equal(t, *p.ExpiresAt, *r.ExpiresAt)

	charges := s.providerCharges(t, "demo", key)
	require.Len(t, charges, 1)
	require.Equal(t, p.Charge.ProviderChargeId, charges[0].ID)
	require.Equal(t, int64(4250), charges[0].Amount)
	require.NotEqual(t, key, charges[0].IdempotencyKey, "the provider gets our own key, not the client's")
}

func TestChargeCard_SameKeyDifferentInput_IsRefused(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	key := newKey()
	require.Equal(t, "SUCCEEDED", s.chargeCard(t, "demo-key", key, visa(1000)).Data.ChargeCard.Status)

	changes := map[string]func(*apiclient.ChargeCardInput){
		"amount":        func(in *apiclient.ChargeCardInput) { in.Amount = new(1001) },
		"currency":      func(in *apiclient.ChargeCardInput) { in.Currency = new("EUR") },
		"paymentMethod": func(in *apiclient.ChargeCardInput) { in.PaymentMethod = "pm_card_mastercard" },
		"orderId":       func(in *apiclient.ChargeCardInput) { in.OrderId = new("another-order") },
		"description":   func(in *apiclient.ChargeCardInput) { in.Description = new("something else") },
	}
	for field, change := range changes {
		in := visa(1000)
		change(&in)
		r := s.chargeCard(t, "demo-key", key, in)
		require.Equal(t, "IDEMPOTENCY_KEY_REUSED", r.code(t), field)
		require.Nil(t, r.Data.ChargeCard)
	}
	require.Len(t, s.providerCharges(t, "demo", key), 1, "no second charge")
}

func TestChargeCard_EquivalentInput_IsAReplay(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	key := newKey()
	first := s.chargeCardRaw(t, "demo-key", key, map[string]any{
		"paymentMethod": "pm_card_visa", "currency": "USD", "amount": 500, "orderId": nil,
	})
	require.Equal(t, "SUCCEEDED", first.Data.ChargeCard.Status)
	// The same request with other field order, an omitted optional field and
	// empty strings for absent ones, sent as an inline literal with other whitespace.
	mutation := `mutation {
		chargeCard(  idempotencyKey: "` + key + `",
			input: { description: "", orderId: "", amount: 500,   currency: "USD", paymentMethod: "pm_card_visa" }
		) { ` + payloadFields + ` } }`
	second := s.do(t, bearer("demo-key"), mutation, nil)
	require.Empty(t, second.Errors)
	require.True(t, second.Data.ChargeCard.Replayed)
	require.Equal(t, first.Data.ChargeCard.Charge.Id, second.Data.ChargeCard.Charge.Id)
}

func TestChargeCard_Decline_IsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	for pm, code := range map[string]string{
		"pm_card_chargeDeclined":    "card_declined",
		"pm_card_insufficientFunds": "insufficient_funds",
		"pm_card_unknownToken":      "payment_method_unknown",
	} {
		key := newKey()
		first := s.chargeCard(t, "demo-key", key, withPaymentMethod(pm)).Data.ChargeCard
		require.Equal(t, "FAILED", first.Status, pm)
		require.Equal(t, code, first.Failure.Code)
		require.NotEmpty(t, first.Failure.Message)
		require.Nil(t, first.Charge)
		require.False(t, first.Replayed)

		again := s.chargeCard(t, "demo-key", key, withPaymentMethod(pm)).Data.ChargeCard
		require.Equal(t, "FAILED", again.Status)
		require.True(t, again.Replayed)
		require.Equal(t, *first.Failure, *again.Failure)
		for _, c := range s.providerCharges(t, "demo", key) {
			require.Equal(t, "failed", c.Status, "a decline never moves money")
		}
	}
}

func TestChargeCard_UnknownOutcome_StaysProcessing(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// No reconciler pass during the test: what the request itself leaves behind is checked here.
	s := startServer(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h"})
	pool := dbtest.Open(t, dbURL)
	for pm, want := range map[string]struct {
		providerCharges int
		afterRetry      string
	}{
		// Charged, but the answer never arrived: the retry takes the released
		// attempt over, finds the charge by our provider key and records it.
		"pm_card_lostResponse": {1, "SUCCEEDED"},
		// 500 without charging: the retry sends it again, still unknown.
		"pm_card_providerError": {0, "PROCESSING"},
	} {
		key := newKey()
		r := s.chargeCard(t, "demo-key", key, withPaymentMethod(pm))
		require.Empty(t, r.Errors, pm)
		p := r.Data.ChargeCard
		require.Equal(t, "PROCESSING", p.Status, pm)
		require.NotNil(t, p.RetryAfterMs)
		require.Positive(t, *p.RetryAfterMs)
		require.Nil(t, p.Failure)

		require.Equal(t, "PROCESSING", attemptStatus(t, pool, key), "the attempt is neither FAILED nor deleted")
		status := s.chargeStatus(t, "demo-key", key).Data.ChargeStatus
		require.Equal(t, "PROCESSING", status.Status)
		retry := s.chargeCard(t, "demo-key", key, withPaymentMethod(pm)).Data.ChargeCard
		require.Equal(t, want.afterRetry, retry.Status, pm)
		require.Len(t, s.providerCharges(t, "demo", key), want.providerCharges, "%s: a retry does not charge again", pm)
	}
	// The service's own lines about a request carry its request id.
	for _, line := range strings.Split(s.logText(), "\n") {
		if strings.Contains(line, "provider outcome unknown") {
			require.Contains(t, line, "request_id=", line)
		}
	}
	require.Contains(t, s.logText(), "provider outcome unknown")
}

func TestChargeCard_InvalidInput_IsRefusedAndNothingStored(t *testing.T) {
	t.Parallel()
	s, dbURL := setup(t)
	pool := dbtest.Open(t, dbURL)
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name  string
		key   string
		input any
		field string
	}{
		{"empty key", "", visa(100), "idempotencyKey"},
		{"key with a space", "a b", visa(100), "idempotencyKey"},
		{"key with a tab", "a\tb", visa(100), "idempotencyKey"},
		{"key not ASCII", "clé", visa(100), "idempotencyKey"},
		{"key too long", long(256), visa(100), "idempotencyKey"},
		{"zero amount", newKey(), visa(0), "input.amount"},
		{"negative amount", newKey(), visa(-5), "input.amount"},
		{"amount too large", newKey(), visa(100_000_000), "input.amount"},
		{"lower-case currency", newKey(), map[string]any{"amount": 100, "currency": "usd", "paymentMethod": "pm_card_visa"}, "input.currency"},
		{"short currency", newKey(), map[string]any{"amount": 100, "currency": "US", "paymentMethod": "pm_card_visa"}, "input.currency"},
		{"unknown currency", newKey(), map[string]any{"amount": 100, "currency": "ZZZ", "paymentMethod": "pm_card_visa"}, "input.currency"},
		{"empty payment method", newKey(), withPaymentMethod(""), "input.paymentMethod"},
		{"payment method with spaces", newKey(), withPaymentMethod("pm card"), "input.paymentMethod"},
		{"order id too long", newKey(), map[string]any{"amount": 100, "currency": "USD", "paymentMethod": "pm_card_visa", "orderId": long(101)}, "input.orderId"},
		{"description too long", newKey(), map[string]any{"amount": 100, "currency": "USD", "paymentMethod": "pm_card_visa", "description": long(501)}, "input.description"},
		{"description with control characters", newKey(), map[string]any{"amount": 100, "currency": "USD", "paymentMethod": "pm_card_visa", "description": "a\x00b"}, "input.description"},
		{"description with a C1 control", newKey(), map[string]any{"amount": 100, "currency": "USD", "paymentMethod": "pm_card_visa", "description": "a\u0085b"}, "input.description"},
		{"order id with a line separator", newKey(), map[string]any{"amount": 100, "currency": "USD", "paymentMethod": "pm_card_visa", "orderId": "a\u2028b"}, "input.orderId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.chargeCardRaw(t, "demo-key", tt.key, tt.input)
			require.Equal(t, "BAD_USER_INPUT", r.code(t))
			require.Equal(t, tt.field, r.Errors[0].Extensions["field"])
			require.NotEmpty(t, r.Errors[0].Message)
		})
	}
	// Limits themselves are accepted.
	ok := s.chargeCardRaw(t, "demo-key", long(255), map[string]any{
		"amount": 99_999_999, "currency": "JPY", "paymentMethod": "pm_card_visa", "orderId": long(100), "description": long(500),
	})
	require.Empty(t, ok.Errors)
	require.Equal(t, "SUCCEEDED", ok.Data.ChargeCard.Status)

	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM charge_attempts").Scan(&attempts))
	require.Equal(t, 1, attempts, "only the valid request stored anything")
	charges, err := s.api("").ListProviderCharges(context.Background(), apiclient.ProviderChargeFilter{})
	require.NoError(t, err)
	require.Len(t, charges, 1, "only the valid request reached the provider")
}

func TestChargeCard_MissingOrMistypedField_IsAGraphQLError(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	r := s.chargeCardRaw(t, "demo-key", newKey(), map[string]any{"amount": "ten", "currency": "USD", "paymentMethod": "pm_card_visa"})
	require.NotEmpty(t, r.Errors)
	require.NotEqual(t, "INTERNAL_SERVER_ERROR", r.Errors[0].Extensions["code"])
	r = s.chargeCardRaw(t, "demo-key", newKey(), map[string]any{"currency": "USD", "paymentMethod": "pm_card_visa"})
	require.NotEmpty(t, r.Errors)
	require.NotEqual(t, "INTERNAL_SERVER_ERROR", r.Errors[0].Extensions["code"])
}

func TestChargeCard_KeysAreScopedPerMerchant(t *testing.T) {
	t.Parallel()
	s, dbURL := setup(t)
	pool := dbtest.Open(t, dbURL)
	_, acmeKey, err := merchant.New(pool, false).CreateAPIKey(context.Background(), "acme", merchant.KeySecret)
	require.NoError(t, err)

	key := "order-42-attempt-1" // a key two merchants may well both choose
	demo := s.chargeCard(t, "demo-key", key, visa(100)).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", demo.Status)
	require.Nil(t, s.chargeStatus(t, acmeKey, key).Data.ChargeStatus, "acme cannot see demo's result")

	acme := s.chargeCard(t, acmeKey, key, visa(999)).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", acme.Status, "the same key string is acme's own attempt, not a reuse")
	require.False(t, acme.Replayed)
	require.NotEqual(t, demo.Charge.Id, acme.Charge.Id)
	require.Len(t, s.providerCharges(t, "demo", key), 1)
	require.Len(t, s.providerCharges(t, "acme", key), 1)
	require.Equal(t, 100, s.chargeStatus(t, "demo-key", key).Data.ChargeStatus.Charge.Amount)
}

func TestChargeStatus_ReportsTheStoredAttempt_NullForAnUnusedKey(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	require.Nil(t, s.chargeStatus(t, "demo-key", newKey()).Data.ChargeStatus, "a key never used is null")
	key := newKey()
	charged := s.chargeCard(t, "demo-key", key, visa(700)).Data.ChargeCard
	status := s.chargeStatus(t, "demo-key", key)
	require.Empty(t, status.Errors)
	require.Equal(t, "SUCCEEDED", status.Data.ChargeStatus.Status)
	require.Equal(t, charged.Charge.Id, status.Data.ChargeStatus.Charge.Id)
	require.Equal(t, "BAD_USER_INPUT", s.chargeStatus(t, "demo-key", "no spaces allowed").code(t))
}

func TestAuth_OnlyALiveKeyOfTheEnvironmentCharges(t *testing.T) {
	t.Parallel()
	s, dbURL := setup(t)
	tests := map[string]map[string]string{
		"no header":      nil,
		"unknown key":    bearer("not-a-key"),
		"other scheme":   {"Authorization": "Basic ZGVtbzpkZW1vLWtleQ=="},
		"bearer, no key": {"Authorization": "Bearer "},
	}
	for name, headers := range tests {
		key := newKey()
		r := s.do(t, headers, chargeCardMutation, map[string]any{"key": key, "input": visa(100)})
		require.Equal(t, "UNAUTHENTICATED", r.code(t), name)
		r = s.do(t, headers, chargeStatusQuery, map[string]any{"key": key})
		require.Equal(t, "UNAUTHENTICATED", r.code(t), name)
		require.Empty(t, s.providerCharges(t, "demo", key), name)
	}

	// A key made as `chargeonce apikey create` makes one works, and is
	// stored only as its hash (systest's TestAPIKeyCommands_… runs the
	// command itself).
	_, apiKey, err := merchant.New(dbtest.Open(t, dbURL), false).CreateAPIKey(context.Background(), "shop", merchant.KeySecret)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(apiKey, "co_sk_"), apiKey)
	r := s.chargeCard(t, apiKey, newKey(), visa(100))
	require.Empty(t, r.Errors)
	require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status)
	pool := dbtest.Open(t, dbURL)
	var hashed, clear int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FILTER (WHERE key_hash = sha256(convert_to($1::text, 'UTF8'))), count(*) FILTER (WHERE key_prefix = $1::text) FROM api_keys",
		apiKey).Scan(&hashed, &clear))
	require.Equal(t, 1, hashed, "the key is stored hashed")
	require.Zero(t, clear, "the key is never stored in clear")

	// Production refuses the development-only demo key, even though it is in the database.
	prod := startServer(t, dbURL, stripefake.Start(t).Env(map[string]string{"APP_ENV": "production"}))
	require.Equal(t, "UNAUTHENTICATED", prod.chargeCard(t, "demo-key", newKey(), visa(100)).code(t))
	require.Equal(t, "SUCCEEDED", prod.chargeCard(t, apiKey, newKey(), visa(100)).Data.ChargeCard.Status)

	// Development aids do not exist in production: the fault switch is
	// ignored, and there is no playground, simulator or demo page.
	dropped := prod.do(t, map[string]string{"Authorization": "Bearer " + apiKey, "X-Chargeonce-Fault": "drop-response"},
		chargeCardMutation, map[string]any{"key": newKey(), "input": visa(100)})
	require.Empty(t, dropped.Errors)
	require.Equal(t, "SUCCEEDED", dropped.Data.ChargeCard.Status, "the answer arrives whole")
	for _, path := range []string{"/playground", "/provider/v1/charges", "/"} {
		resp, err := prod.client.Get(prod.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
}

func TestChargeCard_IdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	key := newKey()
	vars := map[string]any{"key": key, "input": visa(100)}
	same := s.do(t, map[string]string{"Authorization": "Bearer demo-key", "Idempotency-Key": `"` + key + `"`}, chargeCardMutation, vars)
	require.Empty(t, same.Errors)
	require.Equal(t, "SUCCEEDED", same.Data.ChargeCard.Status)

	other := newKey()
	differ := s.do(t, map[string]string{"Authorization": "Bearer demo-key", "Idempotency-Key": other},
		chargeCardMutation, map[string]any{"key": newKey(), "input": visa(100)})
	require.Equal(t, "BAD_USER_INPUT", differ.code(t))
	require.Empty(t, s.providerCharges(t, "demo", other))
}

func TestServer_ProbesAndPlaygroundAnswer_QueriesRunOverGET(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	for path, want := range map[string]string{
		"/healthz":    "ok",
		"/readyz":     "ok",
		"/playground": "Bearer demo-key",
	} {
		resp, err := s.client.Get(s.URL + path)
		require.NoError(t, err)
		var body strings.Builder
		_, err = io.Copy(&body, resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, path)
		require.Contains(t, body.String(), want, path)
	}
	// Queries work over GET too.
	resp, err := s.client.Get(s.URL + "/graphql?query=" + url.QueryEscape(`{ __typename }`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

func attemptStatus(t *testing.T, pool *pgxpool.Pool, key string) string {
	t.Helper()
	var status string
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT status FROM charge_attempts WHERE idempotency_key = $1", key).Scan(&status))
	return status
}
