package providertest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
)

// TestConformance_Memory runs the suite against the in-memory provider,
// with every behaviour offered.
func TestConformance_Memory(t *testing.T) {
	t.Parallel()
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		m := providertest.NewMemory(providertest.MemoryOptions{})
		return providertest.Harness{
			Provider:       m,
			SucceedingCard: providertest.CardVisa,
			DecliningCard:  providertest.CardDeclined,
			DeclineCode:    "card_declined",
			Charges: func(_ *testing.T, req payment.ProviderChargeRequest) int {
				return count(m.ChargeKeys(), req.IdempotencyKey)
			},
			// Charged, and the answer lost.
			LoseOutcome: func(*testing.T) payment.ProviderChargeRequest {
				return providertest.Request(providertest.CardLostResponse, 1999, "USD")
			},
			// The next new key's first send saves a 500, replayed after.
			SpendKey: func(*testing.T) payment.ProviderChargeRequest {
				m.SpendNextKeys(1)
				return providertest.Request(providertest.CardVisa, 1999, "USD")
			},
			AuthenticationCard: providertest.CardAuthenticationRequired,
			Authenticate: func(t *testing.T, pc payment.ProviderCharge) {
				_, err := m.PressChallenge(pc.Action.URL, "complete")
				require.NoError(t, err)
			},
			Refunds:  true,
			Captures: true,
			ExpireAuthorization: func(t *testing.T, pc payment.ProviderCharge) {
				require.NoError(t, m.Expire(pc.ID))
			},
			// Captured, and every answer lost.
			LoseCaptureOutcome: func(*testing.T) payment.ProviderChargeRequest {
				return providertest.ManualRequest(providertest.CardCaptureLostResponse, 1999, "USD")
			},
		}
	})
}

// count is how many times s holds v.
func count(s []string, v string) int {
	n := 0
	for i := range s {
		if s[i] == v {
			n++
		}
	}
	return n
}
