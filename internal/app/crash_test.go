package app

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// finalStatus polls chargeStatus until the attempt leaves PROCESSING.
func (s *testServer) finalStatus(t *testing.T, key string, within time.Duration) *apiclient.ChargeResult {
	t.Helper()
	var p *apiclient.ChargeResult
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p = s.chargeStatus(c, "demo-key", key).Data.ChargeStatus
		require.NotNil(c, p)
		require.NotEqual(c, "PROCESSING", p.Status)
	}, within, 50*time.Millisecond, "attempt %s still not final", key)
	return p
}

func TestChargeCard_ResponseLostOnTheWire_RetryIsAReplay(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, map[string]string{"SIM_SLOW_DELAY": "500ms"})
	key := newKey()
	// The client gives up once its charge is under way and before the answer
	// arrives, as when a mobile connection drops; the server is fine and
	// finishes the charge.
	ctx, hangUp := context.WithCancel(context.Background())
	lost := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql",
			jsonBody(t, map[string]any{"query": chargeCardMutation, "variables": map[string]any{"key": key, "input": withPaymentMethod("pm_card_slow")}}))
		if err == nil {
			req.Header = jsonHeaders("Authorization", "Bearer demo-key")
			var resp *http.Response
			if resp, err = s.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		lost <- err
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := s.chargeStatus(c, "demo-key", key).Data.ChargeStatus
		require.NotNil(c, p)
		require.Equal(c, "PROCESSING", p.Status)
	}, 10*time.Second, 10*time.Millisecond, "the charge is under way")
	hangUp()
	require.Error(t, <-lost, "the client never got its answer")

	final := s.finalStatus(t, key, 10*time.Second)
	require.Equal(t, "SUCCEEDED", final.Status)
	retry := s.chargeCard(t, "demo-key", key, withPaymentMethod("pm_card_slow")).Data.ChargeCard
	require.True(t, retry.Replayed)
	require.Equal(t, final.Charge.Id, retry.Charge.Id)
	require.Equal(t, 1, len(s.providerCharges(t, "demo", key)))
}

func TestReconciler_SettlesUnknownOutcomesThroughTheServer(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, map[string]string{
		"PROCESSING_LEASE": "2s", "RECONCILE_INTERVAL": "200ms", "REDRIVE_WINDOW": "1s",
	})
	lost, failing := newKey(), newKey()
	for key, pm := range map[string]string{lost: "pm_card_lostResponse", failing: "pm_card_providerError"} {
		r := s.chargeCard(t, "demo-key", key, withPaymentMethod(pm)).Data.ChargeCard
		require.Equal(t, "PROCESSING", r.Status, pm)
		require.Positive(t, *r.RetryAfterMs)
	}

	charged := s.finalStatus(t, lost, 10*time.Second)
	require.Equal(t, "SUCCEEDED", charged.Status, "the provider charged; the reconciler learns it by our key")
	ledger := s.providerCharges(t, "demo", lost)
	require.Equal(t, 1, len(ledger))
	require.Equal(t, ledger[0].ID, charged.Charge.ProviderChargeId)

	failed := s.finalStatus(t, failing, 10*time.Second)
	require.Equal(t, "FAILED", failed.Status, "never charged, and the redrive window has passed")
	require.Equal(t, "provider_unavailable", failed.Failure.Code)
	require.Empty(t, s.providerCharges(t, "demo", failing))
}
