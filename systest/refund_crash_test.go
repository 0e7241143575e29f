package systest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

const refundMutation = `mutation Refund($key: String!, $input: RefundInput!) {
	refundCharge(idempotencyKey: $key, input: $input) { status replayed refund { id amount providerRefundId } } }`

type refundAnswer struct {
	RefundCharge struct {
		Status   string `json:"status"`
		Replayed bool   `json:"replayed"`
		Refund   *struct {
			ID               string `json:"id"`
			Amount           int    `json:"amount"`
			ProviderRefundID string `json:"providerRefundId"`
		} `json:"refund"`
	} `json:"refundCharge"`
}

// refund sends refundCharge of amount of chargeID under key with the demo
// secret key; err is the transport's, for a server that dies meanwhile.
func (s *server) refund(t *testing.T, key, chargeID string, amount int) (refundAnswer, error) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": refundMutation,
		"variables": map[string]any{"key": key, "input": map[string]any{"chargeId": chargeID, "amount": amount}}})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiclient.DemoAPIKey)
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return refundAnswer{}, err
	}
	defer resp.Body.Close()
	var out struct {
		Data   refundAnswer `json:"data"`
		Errors []gqlError   `json:"errors"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Empty(t, out.Errors)
	return out.Data, nil
}

// providerRefunds lists every refund of the simulated provider that s
// serves, through its API under /provider.
func (s *server) providerRefunds(t *testing.T) []apiclient.ProviderRefund {
	t.Helper()
	refunds, err := s.demo().ListProviderRefunds(t.Context(), apiclient.ProviderRefundFilter{})
	require.NoError(t, err)
	return refunds
}

func TestCrash_KilledBetweenTheProvidersRefundAndItsRecord_OneRefund(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	// The provider runs in a process of its own: the crash takes down
	// chargeonce, not the provider.
	provider := startServer(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h"})
	providerURL := provider.URL + "/provider"
	charged := provider.chargeCard(t, apiclient.DemoAPIKey, newKey(), withPaymentMethod("pm_card_visa"))
	require.Equal(t, "SUCCEEDED", charged.Status)

	doomed := startServer(t, withCrash(map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": providerURL}, "after-provider"))
	key := newKey()
	_, err := doomed.refund(t, key, charged.Charge.Id, 700)
	require.Error(t, err, "the client sees the connection die, not an answer")
	requireKilled(t, doomed.Process, 10*time.Second, "the server died of SIGKILL after the provider refunded")
	require.Len(t, provider.providerRefunds(t), 1, "the provider made the refund")
	require.Zero(t, queryOne[int](t, pool, `SELECT count(*)::int FROM refunds`), "nothing recorded it yet")

	// A fresh instance's reconciler settles it by reading the provider.
	survivor := startServer(t, map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": providerURL})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var status string
		if assert.NoError(c, pool.QueryRow(t.Context(), `SELECT status FROM charge_attempts WHERE idempotency_key = $1`, key).Scan(&status)) {
			assert.Equal(c, "SUCCEEDED", status)
		}
	}, 15*time.Second, 100*time.Millisecond) // lease 2s + interval 200ms, with room
	retry, err := survivor.refund(t, key, charged.Charge.Id, 700)
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", retry.RefundCharge.Status)
	require.True(t, retry.RefundCharge.Replayed)
	refunds := provider.providerRefunds(t)
	require.Len(t, refunds, 1, "one refund at the provider")
	require.Equal(t, refunds[0].ID, retry.RefundCharge.Refund.ProviderRefundID, "the record is the provider's refund")
	require.Equal(t, 700, queryOne[int](t, pool, `SELECT amount_refunded::int FROM charges WHERE id = $1`, charged.Charge.Id))
}
