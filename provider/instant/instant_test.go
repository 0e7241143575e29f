package instant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/payment"
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
				FindAfterCharge: "the instant provider stores nothing, so FindCharges knows of no charge, and settle sends again",
				LoseOutcome:     "the instant provider answers at once, in process: its outcome is never unknown",
				SpendKey:        "the instant provider saves nothing for a key, so it replays no failure",
				Authenticate:    "no card of the instant provider needs authentication",
				FindAfterRefund: "the instant provider stores nothing, so FindRefund knows of no refund, and settle sends again",
				RefuseRefund:    "the instant provider knows no charge's amount, so it refuses no refund",
			},
		}
	})
}

func TestDelay_AnswersAfterIt_OrUnknownWhenTheCallerGivesUp(t *testing.T) {
	t.Parallel()
	p := instant.Provider{Delay: 200 * time.Millisecond}
	req := providertest.Request("pm_card_visa", 1999, "USD")
	start := time.Now()
	pc, err := p.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.True(t, pc.Succeeded)
	require.GreaterOrEqual(t, time.Since(start), p.Delay, "answered after its delay")

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	_, err = p.CreateCharge(ctx, req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "a caller that stops waiting does not know the outcome")
}
