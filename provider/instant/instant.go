// Package instant is a payment.Provider that answers every charge at once
// and stores nothing: a provider that costs nothing, so that benchmarks
// measure chargeonce itself (PROVIDER=instant; development and benchmarks
// only). A card token of Declined is declined; any other succeeds. Its
// charge id is derived from our provider key, so a re-send gets the same
// charge; FindCharges knows of none, since nothing is stored, and settle
// then sends again. With a Delay, a charge is answered after it, as a slow
// provider would, at no other cost: what a charge holds while it waits.
package instant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"chargeonce/payment"
)

// Provider is the instant provider.
type Provider struct {
	// Delay is how long each charge takes (INSTANT_DELAY); zero: none.
	Delay time.Duration
}

var _ payment.Provider = Provider{}

// wait takes p's delay, or until ctx ends: then the call's outcome is
// unknown, as a provider's that did not answer in time.
func (p Provider) wait(ctx context.Context) error {
	if p.Delay <= 0 {
		return nil
	}
	t := time.NewTimer(p.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", payment.ErrOutcomeUnknown, ctx.Err())
	}
}

// Declined is the card token Provider declines.
const Declined = "pm_card_chargeDeclined"

// CreateCharge implements payment.Provider.
func (p Provider) CreateCharge(ctx context.Context, req payment.ProviderChargeRequest) (payment.ProviderCharge, error) {
	if err := p.wait(ctx); err != nil {
		return payment.ProviderCharge{}, err
	}
	if req.PaymentMethod == Declined {
		return payment.ProviderCharge{FailureCode: "card_declined", FailureMessage: "The card was declined."}, nil
	}
	pc := payment.ProviderCharge{ID: "instant_" + req.IdempotencyKey, Succeeded: true}
	if req.CaptureMethod == payment.CaptureManual {
		pc.Authorization = &payment.ProviderAuthorization{State: payment.AuthorizationOpen, Amount: req.Amount,
			ExpiresAt: time.Now().Add(AuthorizationWindow)}
	}
	return pc, nil
}

// AuthorizationWindow is how long an authorization of the instant provider
// says it lasts.
const AuthorizationWindow = 7 * 24 * time.Hour

// FindCharges implements payment.Provider. Nothing is stored, so it knows
// of none.
func (Provider) FindCharges(context.Context, payment.ProviderChargeRequest) ([]payment.ProviderCharge, error) {
	return nil, nil
}

// CancelCharge implements payment.Provider. Its charges never wait for the
// shopper, so there is never one to cancel.
func (Provider) CancelCharge(context.Context, payment.ProviderChargeRequest, string) (payment.ProviderCharge, error) {
	return payment.ProviderCharge{}, errors.New("instant: no charge waits for authentication")
}

// CreateRefund implements payment.Provider: every refund succeeds at once,
// its id derived from our provider key, so that a re-send gets the same one.
func (Provider) CreateRefund(_ context.Context, req payment.ProviderRefundRequest) (payment.ProviderRefund, error) {
	return payment.ProviderRefund{ID: "instant_" + req.IdempotencyKey, State: payment.RefundSucceeded}, nil
}

// FindRefund implements payment.Provider. Nothing is stored, so it knows
// of none, and settle sends again under the same key.
func (Provider) FindRefund(context.Context, payment.ProviderRefundRequest) (*payment.ProviderRefund, error) {
	return nil, nil
}

// CaptureCharge implements payment.Provider: every capture succeeds at
// once, its id derived from our provider key.
func (Provider) CaptureCharge(_ context.Context, req payment.ProviderCaptureRequest) (payment.ProviderCapture, error) {
	return payment.ProviderCapture{ID: "instant_" + req.IdempotencyKey, Succeeded: true}, nil
}

// FindCapture implements payment.Provider. Nothing is stored.
func (Provider) FindCapture(context.Context, payment.ProviderCaptureRequest) (*payment.ProviderCapture, error) {
	return nil, nil
}

// VoidCharge implements payment.Provider: every void succeeds at once.
func (Provider) VoidCharge(_ context.Context, req payment.ProviderVoidRequest) (payment.ProviderVoid, error) {
	return payment.ProviderVoid{ID: "instant_" + req.IdempotencyKey, Succeeded: true}, nil
}

// FindVoid implements payment.Provider. Nothing is stored.
func (Provider) FindVoid(context.Context, payment.ProviderVoidRequest) (*payment.ProviderVoid, error) {
	return nil, nil
}

// ReadAuthorization implements payment.Provider. Nothing is stored, so it
// cannot say.
func (Provider) ReadAuthorization(context.Context, string) (payment.ProviderAuthorization, error) {
	return payment.ProviderAuthorization{}, errors.New("instant: authorizations are not stored")
}
