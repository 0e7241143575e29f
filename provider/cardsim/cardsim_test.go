package cardsim_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/cardsim"
	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
	"chargeonce/provider/providertest"
)

// TestConformance_AgainstTheSimulator runs the suite through the client
// against the real simulator, over HTTP, on a real database.
func TestConformance_AgainstTheSimulator(t *testing.T) {
	t.Parallel()
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		pool := dbtest.NewPool(t, cardsimtest.Schema)
		sim := httptest.NewServer(cardsim.NewHandler(pool, cardsim.Config{}))
		t.Cleanup(sim.Close)
		return providertest.Harness{
			Provider:       simprovider.New(sim.URL, 5*time.Second, nil),
			SucceedingCard: "pm_card_visa",
			DecliningCard:  "pm_card_chargeDeclined",
			DeclineCode:    "card_declined",
			Charges: func(t *testing.T, req payment.ProviderChargeRequest) int {
				var n int
				require.NoError(t, pool.QueryRow(t.Context(),
					"SELECT count(*) FROM cardsim.charges WHERE idempotency_key = $1", req.IdempotencyKey).Scan(&n))
				return n
			},
			// The simulator charges, then drops the connection unanswered.
			LoseOutcome: func(*testing.T) payment.ProviderChargeRequest {
				return providertest.Request("pm_card_lostResponse", 1999, "USD")
			},
			Cannot: providertest.Cannot{
				SpendKey: "the simulator saves no failure for a key: pm_card_providerError answers 500 before anything is stored, " +
					"on every send alike, so no key is ever spent",
			},
		}
	})
}
