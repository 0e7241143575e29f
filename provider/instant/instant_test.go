package instant_test

import (
	"testing"

	"chargeonce/provider/instant"
	"chargeonce/provider/providertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, func(*testing.T) providertest.Harness {
		return providertest.Harness{
			Provider:       instant.Provider{},
			SucceedingCard: "pm_card_visa",
			DecliningCard:  instant.Declined,
			DeclineCode:    "card_declined",
			Refunds:        true,
			Cannot: providertest.Cannot{
				CountCharges:    "the instant provider stores nothing: its charge id, derived from our provider key, is what makes a repeat the same charge",
				FindAfterCharge: "the instant provider stores nothing, so FindCharge knows of no charge, and settle sends again",
				LoseOutcome:     "the instant provider answers at once, in process: its outcome is never unknown",
				SpendKey:        "the instant provider saves nothing for a key, so it replays no failure",
				Authenticate:    "no card of the instant provider needs authentication",
				FindAfterRefund: "the instant provider stores nothing, so FindRefund knows of no refund, and settle sends again",
				RefuseRefund:    "the instant provider knows no charge's amount, so it refuses no refund",
			},
		}
	})
}
