package stripe

import (
	"context"
	"errors"
	"fmt"

	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// Failure codes of chargeonce's own, beside Stripe's decline codes.
const (
	// CodeAuthenticationRequired: the card needs 3-D Secure and the charge
	// has no return URL to bring the shopper back to; the PaymentIntent was
	// cancelled.
	CodeAuthenticationRequired = payment.FailureAuthenticationRequired
	// CodeIdempotencyError: Stripe refused our key, sent before with other
	// parameters, and holds no PaymentIntent for the attempt.
	CodeIdempotencyError = "provider_idempotency_error"
	// CodeProviderRejected: Stripe refused the request as invalid.
	CodeProviderRejected = "provider_rejected_request"
	// CodeInvalidPaymentMethod: Stripe does not know the payment method.
	CodeInvalidPaymentMethod = "invalid_payment_method"
	// CodePaymentCanceled: the PaymentIntent was cancelled at Stripe by
	// someone else than chargeonce (e.g. from the Dashboard).
	CodePaymentCanceled = "payment_canceled"
)

const messageIdempotencyError = "The payment could not be processed. The card was not charged."

// shopperMessages are fixed messages, safe to show a shopper, per failure
// code; Stripe's own message text is never passed on.
var shopperMessages = map[string]string{
	"card_declined":            "The card was declined.",
	"insufficient_funds":       "The card has insufficient funds.",
	"expired_card":             "The card has expired.",
	"incorrect_cvc":            "The card's security code is incorrect.",
	"incorrect_number":         "The card number is incorrect.",
	"processing_error":         "The card could not be processed. The card was not charged; try again.",
	"card_velocity_exceeded":   "The card's limit was exceeded.",
	CodeAuthenticationRequired: "This card requires authentication (3-D Secure), which this checkout cannot perform. The card was not charged; use another card.",
	CodeIdempotencyError:       messageIdempotencyError,
	CodeProviderRejected:       "The card provider refused the payment request. The card was not charged.",
	CodeInvalidPaymentMethod:   "The payment method is not valid. The card was not charged.",
	CodePaymentCanceled:        "The payment was cancelled at the card provider. The card was not charged.",
	"amount_too_small":         "The amount is below the card provider's minimum. The card was not charged.",
	"amount_too_large":         "The amount is above the card provider's maximum. The card was not charged.",
	CodeAmountNotSupported:     "The card provider cannot charge this amount in this currency. The card was not charged.",
	CodeCurrencyNotSupported:   "The card provider does not charge in this currency. The card was not charged.",

	payment.FailureAuthenticationFailed:    "The card's authentication (3-D Secure) failed. The card was not charged.",
	payment.FailureAuthenticationAbandoned: "The payment was cancelled because the card's authentication (3-D Secure) was not completed in time. The card was not charged.",
}

// undisclosed are decline codes that Stripe advises not to show the
// shopper (they would tell a fraudster what the bank knows): they are
// reported as card_declined.
var undisclosed = map[string]bool{
	"fraudulent": true, "lost_card": true, "stolen_card": true, "pickup_card": true,
	"restricted_card": true, "merchant_blacklist": true, "security_violation": true,
	"generic_decline": true,
}

func shopperMessage(code string) string {
	if m, ok := shopperMessages[code]; ok {
		return m
	}
	return "The card was declined."
}

// declined is the failure of a card error (or of a PaymentIntent's
// last_payment_error): Stripe's decline_code when it gives one, else its
// code. A failed 3-D Secure (payment_intent_authentication_failure: the
// shopper failed or refused the bank's challenge) is
// authentication_failed.
func declined(id string, se *stripego.Error) payment.ProviderCharge {
	if se.Code == stripego.ErrorCodePaymentIntentAuthenticationFailure {
		code := payment.FailureAuthenticationFailed
		return payment.ProviderCharge{ID: id, FailureCode: code, FailureMessage: shopperMessage(code)}
	}
	code := string(se.DeclineCode)
	if code == "" {
		code = string(se.Code)
	}
	if code == "" || undisclosed[code] {
		code = "card_declined"
	}
	return payment.ProviderCharge{ID: id, FailureCode: code, FailureMessage: shopperMessage(code)}
}

// errUnconfirmed: the PaymentIntent exists but was never confirmed (Stripe
// failed between creating and confirming it), so it holds no charge.
var errUnconfirmed = errors.New("the PaymentIntent was never confirmed")

// settle is the outcome of the attempt's PaymentIntent for CreateCharge: a
// PaymentIntent that was never confirmed is confirmed now, which completes
// the attempt's one charge rather than start another.
func (p *Provider) settle(ctx context.Context, req payment.ProviderChargeRequest, pi *stripego.PaymentIntent) (payment.ProviderCharge, error) {
	pc, err := p.outcome(ctx, req, pi)
	if !errors.Is(err, errUnconfirmed) {
		return pc, err
	}
	params := &stripego.PaymentIntentConfirmParams{}
	if req.ReturnURL != "" {
		// As the create would have: a card that needs 3-D Secure waits at a
		// redirect that brings the shopper back.
		params.ReturnURL = stripego.String(req.ReturnURL)
	}
	params.SetIdempotencyKey(req.IdempotencyKey + "_confirm")
	confirmed, err := p.client.V1PaymentIntents.Confirm(ctx, pi.ID, params)
	var se *stripego.Error
	switch {
	case errors.As(err, &se) && se.Type == stripego.ErrorTypeCard:
		return declined(pi.ID, se), nil
	case err != nil:
		return payment.ProviderCharge{}, p.callFailed(ctx, "confirm PaymentIntent "+pi.ID, err)
	}
	if replayed(confirmed.LastResponse) {
		if confirmed, err = p.retrieve(ctx, pi.ID); err != nil {
			return payment.ProviderCharge{}, err
		}
	}
	pc, err = p.outcome(ctx, req, confirmed)
	if errors.Is(err, errUnconfirmed) {
		return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: PaymentIntent %s is still unconfirmed after its confirmation", payment.ErrOutcomeUnknown, pi.ID)
	}
	return pc, err
}

// outcome maps a PaymentIntent, as it is now, to the attempt's outcome.
func (p *Provider) outcome(ctx context.Context, req payment.ProviderChargeRequest, pi *stripego.PaymentIntent) (payment.ProviderCharge, error) {
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded, stripego.PaymentIntentStatusRequiresCapture:
		// Charged; a manual one authorized, and where it stands now.
		return p.charged(ctx, pi)
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		if pi.LastPaymentError != nil {
			// Confirmed, and the card was declined.
			return declined(pi.ID, pi.LastPaymentError), nil
		}
		return payment.ProviderCharge{}, errUnconfirmed
	case stripego.PaymentIntentStatusRequiresConfirmation:
		return payment.ProviderCharge{}, errUnconfirmed
	case stripego.PaymentIntentStatusRequiresAction:
		return p.requiresAction(ctx, req, pi)
	case stripego.PaymentIntentStatusCanceled:
		if authorized(pi) {
			// An authorization, voided or lapsed since.
			return p.charged(ctx, pi)
		}
		return canceled(req, pi), nil
	case stripego.PaymentIntentStatusProcessing:
		return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: PaymentIntent %s is processing", payment.ErrOutcomeUnknown, pi.ID)
	}
	// A status this code does not know: money may be held; an operator
	// must look.
	p.log.ErrorContext(ctx, "the attempt's PaymentIntent is in a status chargeonce does not handle; the attempt stays PROCESSING",
		"payment_intent", pi.ID, "status", pi.Status, "provider_key", req.IdempotencyKey)
	return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: PaymentIntent %s is %s", payment.ErrOutcomeUnknown, pi.ID, pi.Status)
}
