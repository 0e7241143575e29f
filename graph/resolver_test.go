package graph

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/live"
	"chargeonce/merchant"
	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
)

// The resolvers, through gqlgen's in-process client (client.New): the
// handler as NewHandler builds it, on a real database and the simulated
// provider, with no listener and no server around it. What a resolver
// checks and answers is tested here; what crosses the server (hosts,
// budgets, the loops) is apitest's.

const resolverKey = "resolver-test-key"

type resolverBundle struct {
	gql      *client.Client
	pool     *pgxpool.Pool
	provider *apiclient.Client // the simulator's API, for what reached it
}

func startResolvers(t *testing.T) *resolverBundle {
	t.Helper()
	pool := dbtest.NewPool(t, cardsimtest.Schema)
	sim := cardsimtest.Start(t, pool, cardsimtest.Options{})
	svc := payment.NewService(pool, simprovider.New(sim.URL, 5*time.Second, nil), payment.Config{})
	merchants := merchant.New(pool, true)
	_, err := merchants.EnsureDevelopmentKey(context.Background(), apiclient.DemoMerchant, resolverKey, merchant.KeySecret)
	require.NoError(t, err)
	hub := live.NewHub(pool, svc, live.Config{PollInterval: time.Hour})
	t.Cleanup(hub.Close)
	h := NewHandler(&Resolver{Payments: svc, Merchants: merchants, Live: hub}, HandlerConfig{})
	return &resolverBundle{
		gql:      client.New(h, client.Path("/graphql"), client.AddHeader("Authorization", "Bearer "+resolverKey)),
		pool:     pool,
		provider: sim.API,
	}
}

// post runs one document and returns its data, decoded into v, and its
// errors.
func (b *resolverBundle) post(t *testing.T, query string, v any, vars map[string]any) gqlerror.List {
	t.Helper()
	var opts []client.Option
	for k, val := range vars {
		opts = append(opts, client.Var(k, val))
	}
	r, err := b.gql.RawPost(query, opts...)
	require.NoError(t, err)
	var errs gqlerror.List
	if len(r.Errors) > 0 {
		require.NoError(t, json.Unmarshal(r.Errors, &errs))
	}
	if v != nil && r.Data != nil {
		raw, err := json.Marshal(r.Data)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, v))
	}
	return errs
}

type chargeData struct {
	ChargeCard   *apiclient.ChargeResult `json:"chargeCard"`
	ChargeStatus *apiclient.ChargeResult `json:"chargeStatus"`
}

const (
	resolverPayload = `idempotencyKey status replayed charge { id amount currency } failure { code }`
	resolverCharge  = `mutation($key: String!, $input: ChargeCardInput!) { chargeCard(idempotencyKey: $key, input: $input) { ` + resolverPayload + ` } }`
	resolverStatus  = `query($key: String!) { chargeStatus(idempotencyKey: $key) { ` + resolverPayload + ` } }`
)

func card(amount int) map[string]any {
	return map[string]any{"amount": amount, "currency": "USD", "paymentMethod": "pm_card_visa"}
}

func TestChargeCard_InvalidInput_IsBadUserInputNamingTheField_NothingStored(t *testing.T) {
	t.Parallel()
	b := startResolvers(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	with := func(k string, v any) map[string]any {
		in := card(100)
		in[k] = v
		return in
	}
	tests := []struct {
		name  string
		key   string
		input map[string]any
		field string
	}{
		{"empty key", "", card(100), "idempotencyKey"},
		{"key with a space", "a b", card(100), "idempotencyKey"},
		{"key with a tab", "a\tb", card(100), "idempotencyKey"},
		{"key not ASCII", "clé", card(100), "idempotencyKey"},
		{"key too long", long(256), card(100), "idempotencyKey"},
		{"zero amount", "k-zero", card(0), "input.amount"},
		{"negative amount", "k-negative", card(-5), "input.amount"},
		{"amount too large", "k-large", card(100_000_000), "input.amount"},
		{"lower-case currency", "k-lower", with("currency", "usd"), "input.currency"},
		{"short currency", "k-short", with("currency", "US"), "input.currency"},
		{"unknown currency", "k-unknown", with("currency", "ZZZ"), "input.currency"},
		{"empty payment method", "k-pm-empty", with("paymentMethod", ""), "input.paymentMethod"},
		{"payment method with spaces", "k-pm-spaces", with("paymentMethod", "pm card"), "input.paymentMethod"},
		{"order id too long", "k-order", with("orderId", long(101)), "input.orderId"},
		{"description too long", "k-description", with("description", long(501)), "input.description"},
		{"description with control characters", "k-control", with("description", "a\x00b"), "input.description"},
		{"description with a C1 control", "k-c1", with("description", "a\u0085b"), "input.description"},
		{"order id with a line separator", "k-separator", with("orderId", "a\u2028b"), "input.orderId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := b.post(t, resolverCharge, nil, map[string]any{"key": tt.key, "input": tt.input})
			require.Len(t, errs, 1)
			require.Equal(t, "BAD_USER_INPUT", errs[0].Extensions["code"])
			require.Equal(t, tt.field, errs[0].Extensions["field"])
			require.NotEmpty(t, errs[0].Message)
		})
	}
	// The limits themselves are accepted.
	var ok chargeData
	in := card(99_999_999)
	in["currency"], in["orderId"], in["description"] = "JPY", long(100), long(500)
	require.Empty(t, b.post(t, resolverCharge, &ok, map[string]any{"key": long(255), "input": in}))
	require.Equal(t, "SUCCEEDED", ok.ChargeCard.Status)

	var attempts int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM charge_attempts").Scan(&attempts))
	require.Equal(t, 1, attempts, "only the valid request stored anything")
	charges, err := b.provider.ListProviderCharges(context.Background(), apiclient.ProviderChargeFilter{})
	require.NoError(t, err)
	require.Len(t, charges, 1, "only the valid request reached the provider")
}

func TestChargeCard_MissingOrMistypedField_IsBadUserInput(t *testing.T) {
	t.Parallel()
	b := startResolvers(t)
	for name, input := range map[string]map[string]any{
		"mistyped": {"amount": "ten", "currency": "USD", "paymentMethod": "pm_card_visa"},
		"missing":  {"currency": "USD", "paymentMethod": "pm_card_visa"},
	} {
		errs := b.post(t, resolverCharge, nil, map[string]any{"key": "k-" + name, "input": input})
		require.NotEmpty(t, errs, name)
		require.Equal(t, "BAD_USER_INPUT", errs[0].Extensions["code"], name)
	}
}

func TestChargeStatus_ReportsTheStoredAttempt_NullForAnUnusedKey(t *testing.T) {
	t.Parallel()
	b := startResolvers(t)
	var unused chargeData
	require.Empty(t, b.post(t, resolverStatus, &unused, map[string]any{"key": "never-used"}))
	require.Nil(t, unused.ChargeStatus, "a key never used is null")

	var charged, status chargeData
	require.Empty(t, b.post(t, resolverCharge, &charged, map[string]any{"key": "k-700", "input": card(700)}))
	require.Empty(t, b.post(t, resolverStatus, &status, map[string]any{"key": "k-700"}))
	require.Equal(t, "SUCCEEDED", status.ChargeStatus.Status)
	require.Equal(t, charged.ChargeCard.Charge.Id, status.ChargeStatus.Charge.Id)

	errs := b.post(t, resolverStatus, nil, map[string]any{"key": "no spaces allowed"})
	require.Len(t, errs, 1)
	require.Equal(t, "BAD_USER_INPUT", errs[0].Extensions["code"])
}
