package apitest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

func TestChargeCard_ResponseLostOnTheWire_RetryIsAReplay(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := StartOn(t, dbURL, map[string]string{"SIM_SLOW_DELAY": "500ms"})
	key := NewKey()
	// The client gives up once its charge is under way and before the answer
	// arrives, as when a mobile connection drops; the server is fine and
	// finishes the charge.
	ctx, hangUp := context.WithCancel(context.Background())
	lost := make(chan error, 1)
	body := JSONBody(t, map[string]any{"query": ChargeCardMutation, "variables": map[string]any{"key": key, "input": WithPaymentMethod("pm_card_slow")}})
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql", body)
		if err == nil {
			req.Header = JSONHeaders("Authorization", "Bearer demo-key")
			var resp *http.Response
			if resp, err = s.Client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		lost <- err
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := s.ChargeStatus(c, "demo-key", key).Data.ChargeStatus
		require.NotNil(c, p)
		require.Equal(c, "PROCESSING", p.Status)
	}, 10*time.Second, 10*time.Millisecond, "the charge is under way")
	hangUp()
	require.Error(t, <-lost, "the client never got its answer")

	final := s.FinalStatus(t, key, 10*time.Second)
	require.Equal(t, "SUCCEEDED", final.Status)
	retry := s.ChargeCard(t, "demo-key", key, WithPaymentMethod("pm_card_slow")).Data.ChargeCard
	require.True(t, retry.Replayed)
	require.Equal(t, final.Charge.Id, retry.Charge.Id)
	require.Equal(t, 1, len(s.ProviderCharges(t, "demo", key)))
}

func TestReconciler_SettlesUnknownOutcomesThroughTheServer(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := StartOn(t, dbURL, map[string]string{
		"PROCESSING_LEASE": "2s", "RECONCILE_INTERVAL": "200ms", "REDRIVE_WINDOW": "1s",
	})
	lost, failing := NewKey(), NewKey()
	for key, pm := range map[string]string{lost: "pm_card_lostResponse", failing: "pm_card_providerError"} {
		r := s.ChargeCard(t, "demo-key", key, WithPaymentMethod(pm)).Data.ChargeCard
		require.Equal(t, "PROCESSING", r.Status, pm)
		require.Positive(t, *r.RetryAfterMs)
	}

	charged := s.FinalStatus(t, lost, 10*time.Second)
	require.Equal(t, "SUCCEEDED", charged.Status, "the provider charged; the reconciler learns it by our key")
	ledger := s.ProviderCharges(t, "demo", lost)
	require.Equal(t, 1, len(ledger))
	require.Equal(t, ledger[0].ID, charged.Charge.ProviderChargeId)

	failed := s.FinalStatus(t, failing, 10*time.Second)
	require.Equal(t, "FAILED", failed.Status, "never charged, and the redrive window has passed")
	require.Equal(t, "provider_unavailable", failed.Failure.Code)
	require.Empty(t, s.ProviderCharges(t, "demo", failing))
}
