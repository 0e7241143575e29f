package payment

import "context"

// InstantProvider answers every charge at once and stores nothing: a
// provider that costs nothing, so that benchmarks measure chargeonce itself
// (PROVIDER=instant; development and benchmarks only). A card token of
// InstantDeclined is declined; any other succeeds. Its charge id is derived
// from our provider key, so a re-send gets the same charge; FindCharge knows
// of none, since nothing is stored, and settle then sends again.
type InstantProvider struct{}

// InstantDeclined is the card token InstantProvider declines.
const InstantDeclined = "pm_card_chargeDeclined"

// CreateCharge implements Provider.
func (InstantProvider) CreateCharge(_ context.Context, req ProviderChargeRequest) (ProviderCharge, error) {
	if req.PaymentMethod == InstantDeclined {
		return ProviderCharge{FailureCode: "card_declined", FailureMessage: "The card was declined."}, nil
	}
	return ProviderCharge{ID: "instant_" + req.IdempotencyKey, Succeeded: true}, nil
}

// FindCharge implements Provider.
func (InstantProvider) FindCharge(context.Context, ProviderChargeRequest) (*ProviderCharge, error) {
	return nil, nil
}
