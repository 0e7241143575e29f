package apitest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInstantProvider: PROVIDER=instant charges at once through the whole
// server (claim, finalize, replay), declines its one declined card, and
// keeps the idempotency contract; it is what the benchmarks run against.
func TestInstantProvider_ChargesAtOnceAndKeepsTheContract(t *testing.T) {
	t.Parallel()
	s := Start(t, map[string]string{"PROVIDER": "instant"})
	key := NewKey()
	first := s.ChargeCard(t, "demo-key", key, Visa(1200))
	require.Empty(t, first.Errors)
	require.Equal(t, "SUCCEEDED", first.Data.ChargeCard.Status)
	require.True(t, strings.HasPrefix(first.Data.ChargeCard.Charge.ProviderChargeId, "instant_chargeonce_"),
		first.Data.ChargeCard.Charge.ProviderChargeId)

	again := s.ChargeCard(t, "demo-key", key, Visa(1200))
	require.True(t, again.Data.ChargeCard.Replayed)
	require.Equal(t, first.Data.ChargeCard.Charge.Id, again.Data.ChargeCard.Charge.Id)
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", s.ChargeCard(t, "demo-key", key, Visa(1300)).Code(t))

	declined := s.ChargeCard(t, "demo-key", NewKey(), WithPaymentMethod("pm_card_chargeDeclined"))
	require.Equal(t, "FAILED", declined.Data.ChargeCard.Status)
	require.Equal(t, "card_declined", declined.Data.ChargeCard.Failure.Code)
}
