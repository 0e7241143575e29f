package apitest

import (
	"chargeonce/internal/apiclient"
	"chargeonce/metrics/metricstest"
	"testing"

	"github.com/stretchr/testify/require"
)

const ChargeUpdatedSubscription = `subscription Live($key: String!) { chargeUpdated(idempotencyKey: $key) { ` + PayloadFields + ` } }`

// ProcessingAttempt leaves an attempt of the demo merchant PROCESSING with
// nobody holding it: the provider charged and lost its answer, and the
// request handed the attempt on. Only a reconciler or a retry finalizes it.
func ProcessingAttempt(t *testing.T, s *Server) (string, apiclient.ChargeCardInput) {
	t.Helper()
	key, input := NewKey(), WithPaymentMethod("pm_card_lostResponse")
	r := s.ChargeCard(t, "demo-key", key, input)
	require.Empty(t, r.Errors)
	require.Equal(t, "PROCESSING", r.Data.ChargeCard.Status)
	return key, input
}

// SubscriptionsOpen reads the gauge of open subscriptions from s's /metrics.
func SubscriptionsOpen(t require.TestingT, s *Server) float64 {
	Helper(t)
	return metricstest.Scrape(t, s.Client, s.URL+"/metrics").Value("chargeonce_subscriptions_open")
}
