package stripe

import (
	"context"
	"errors"

	"chargeonce/payment"
)

// CodeCaptureMethodUnsupported fails a charge asked only to authorize
// (captureMethod MANUAL), which this adapter does not send yet: nothing
// is charged.
const CodeCaptureMethodUnsupported = "capture_method_unsupported"

var manualUnsupported = payment.ProviderCharge{FailureCode: CodeCaptureMethodUnsupported,
	FailureMessage: "This card provider integration cannot authorize without capturing yet. The card was not charged."}

// errNoCaptures answers every capture, void and authorization read until
// this adapter's authorizations are built.
var errNoCaptures = errors.New("stripe: authorizations, captures and voids are not supported yet")

// CaptureCharge implements payment.Provider.
func (p *Provider) CaptureCharge(context.Context, payment.ProviderCaptureRequest) (payment.ProviderCapture, error) {
	return payment.ProviderCapture{}, errNoCaptures
}

// FindCapture implements payment.Provider.
func (p *Provider) FindCapture(context.Context, payment.ProviderCaptureRequest) (*payment.ProviderCapture, error) {
	return nil, errNoCaptures
}

// VoidCharge implements payment.Provider.
func (p *Provider) VoidCharge(context.Context, payment.ProviderVoidRequest) (payment.ProviderVoid, error) {
	return payment.ProviderVoid{}, errNoCaptures
}

// FindVoid implements payment.Provider.
func (p *Provider) FindVoid(context.Context, payment.ProviderVoidRequest) (*payment.ProviderVoid, error) {
	return nil, errNoCaptures
}

// ReadAuthorization implements payment.Provider.
func (p *Provider) ReadAuthorization(context.Context, string) (payment.ProviderAuthorization, error) {
	return payment.ProviderAuthorization{}, errNoCaptures
}
