package graph_test

import (
	"bytes"
	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChargeCard_IdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	key := apitest.NewKey()
	vars := map[string]any{"key": key, "input": apitest.Visa(100)}
	same := s.Do(t, map[string]string{"Authorization": "Bearer demo-key", "Idempotency-Key": `"` + key + `"`}, apitest.ChargeCardMutation, vars)
	require.Empty(t, same.Errors)
	require.Equal(t, "SUCCEEDED", same.Data.ChargeCard.Status)

	other := apitest.NewKey()
	differ := s.Do(t, map[string]string{"Authorization": "Bearer demo-key", "Idempotency-Key": other},
		apitest.ChargeCardMutation, map[string]any{"key": apitest.NewKey(), "input": apitest.Visa(100)})
	require.Equal(t, "BAD_USER_INPUT", differ.Code(t))
	require.Empty(t, s.ProviderCharges(t, "demo", other))
}

// TestAliasFlood_OneRequestChargesAtMostOnce sends the document of
// 100 aliased chargeCard fields, each with its own key, and the same through
// fragments: it is refused as a whole, and nothing is claimed or charged.
func TestAliasFlood_OneRequestChargesAtMostOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.StartOn(t, dbURL, nil)
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
		g := s.Send(t, "POST", "/graphql", apitest.JSONHeaders("Authorization", "Bearer demo-key"), bytes.NewReader(body)).GQL(t)
		require.Len(t, g.Errors, 1, name)
		require.Equal(t, "BAD_USER_INPUT", g.Errors[0].Extensions["code"], name)
		require.Contains(t, g.Errors[0].Message, "at most 1", name)
	}
	// A skipped second field does not run, so it does not count.
	skipped := `mutation { a: chargeCard(idempotencyKey: "skip-a", input: {amount: 100, currency: "USD", paymentMethod: "pm_card_visa"}) { status } b: chargeCard(idempotencyKey: "skip-b", input: {amount: 100, currency: "USD", paymentMethod: "pm_card_visa"}) @skip(if: true) { status } }`
	body, err := json.Marshal(map[string]string{"query": skipped})
	require.NoError(t, err)
	g := s.Send(t, "POST", "/graphql", apitest.JSONHeaders("Authorization", "Bearer demo-key"), bytes.NewReader(body)).GQL(t)
	require.Empty(t, g.Errors)

	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM charge_attempts WHERE idempotency_key <> 'skip-a'").Scan(&attempts))
	charges, err := s.API("").ListProviderCharges(context.Background(), apiclient.ProviderChargeFilter{})
	require.NoError(t, err)
	require.Zero(t, attempts, "no key of a refused document was claimed")
	require.Len(t, charges, 1, "only the one charge that ran")
}
