package stripe

import (
	"net/http"
	"testing"
	"time"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
	"chargeonce/provider/stripe/stripefake"
)

// TestConformance_ThroughStripefake runs the suite against the fake Stripe,
// which keeps state: it replays a key's saved answer, a 500 included, and
// counts PaymentIntents per attempt.
func TestConformance_ThroughStripefake(t *testing.T) {
	t.Parallel()
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		b := setup(t)
		return providertest.Harness{
			Provider:       b.provider,
			SucceedingCard: "pm_card_visa",
			DecliningCard:  "pm_card_chargeDeclined",
			DeclineCode:    "card_declined",
			Charges: func(_ *testing.T, req payment.ProviderChargeRequest) int {
				return len(b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String()))
			},
			// Stripe charges, then the connection is cut before the answer.
			LoseOutcome: func(*testing.T) payment.ProviderChargeRequest {
				b.fake.FailCreates(stripefake.CutAfterRun, 1)
				return request("pm_card_visa", 1999, "USD")
			},
			// The first send saves a 500 and makes nothing; Stripe replays it.
			SpendKey: func(*testing.T) payment.ProviderChargeRequest {
				b.fake.FailCreates(stripefake.Error500, 1)
				return request("pm_card_visa", 1999, "USD")
			},
			// The shopper completes the fake's redirect page.
			AuthenticationCard: "pm_card_authenticationRequired",
			Authenticate: func(t *testing.T, pc payment.ProviderCharge) {
				if err := b.fake.CompleteAuthentication(pc.ID); err != nil {
					t.Fatal(err)
				}
			},
			Refunds: true,
			// Multicapture is available, as the fake has it by default.
			Captures: true,
			// The fake's control: the authorization lapses now, and Stripe
			// cancels the PaymentIntent (cancellation_reason automatic).
			ExpireAuthorization: func(t *testing.T, pc payment.ProviderCharge) {
				if err := b.fake.ExpireAuthorization(pc.ID); err != nil {
					t.Fatal(err)
				}
			},
			// Stripe captures, then the connection is cut before the answer.
			LoseCaptureOutcome: func(*testing.T) payment.ProviderChargeRequest {
				b.fake.FailCaptures(stripefake.CutAfterRun, 1)
				return providertest.ManualRequest("pm_card_visa", 1999, "USD")
			},
		}
	})
}

// TestConformance_ThroughStripeMock runs the suite against stripe-mock,
// which refuses any request that Stripe's OpenAPI description does not
// allow, but keeps no state and answers fixtures: only the cases that hold
// for such answers run, and every request they make must be accepted.
func TestConformance_ThroughStripeMock(t *testing.T) {
	t.Parallel()
	base := startStripeMock(t) // stateless: one for every case
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		rec := &recorder{next: http.DefaultTransport}
		t.Cleanup(func() {
			for _, c := range rec.all() {
				if c.status >= 300 {
					t.Errorf("stripe-mock refused %s %s: %s", c.method, c.path, c.body)
				}
			}
		})
		return providertest.Harness{
			Provider:       New(Config{SecretKey: "sk_test_conformance", APIBase: base, Transport: rec, Timeout: 10 * time.Second}),
			SucceedingCard: "pm_card_visa",
			Cannot: providertest.Cannot{
				Deduplicate:     "stripe-mock keeps no state: it answers a repeat of our key anew, never with the first send's charge",
				FindAfterCharge: "stripe-mock charges no card (its fixture reads as declined) and lists fixtures that carry no attempt id",
				Decline:         "stripe-mock answers every card with a fixture that reads as declined: a decline would prove nothing",
				CountCharges:    "stripe-mock keeps no PaymentIntents to count",
				LoseOutcome:     "stripe-mock answers every request it accepts",
				SpendKey:        "stripe-mock saves no answer for a key, so it replays no failure",
				Authenticate:    "stripe-mock's PaymentIntent never waits for a shopper (always requires_payment_method, with a placeholder next_action)",
			},
			// Refunds and Captures unset: every refund case begins with a
			// charge that succeeds, every capture case with an authorization,
			// neither of which stripe-mock ever makes. The requests' shapes
			// are checked by TestConformance_EveryRequestIsOneStripeAccepts.
		}
	})
}
