package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// Failure codes of chargeonce's own, beside Stripe's decline codes.
const (
	// CodeAuthenticationRequired: the card needs 3-D Secure, which this
	// checkout cannot do; the PaymentIntent was cancelled.
	CodeAuthenticationRequired = "authentication_required"
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
// code.
func declined(id string, se *stripego.Error) payment.ProviderCharge {
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
	case stripego.PaymentIntentStatusSucceeded:
		return payment.ProviderCharge{ID: pi.ID, Succeeded: true}, nil
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		if pi.LastPaymentError != nil {
			// Confirmed, and the card was declined.
			return declined(pi.ID, pi.LastPaymentError), nil
		}
		return payment.ProviderCharge{}, errUnconfirmed
	case stripego.PaymentIntentStatusRequiresConfirmation:
		return payment.ProviderCharge{}, errUnconfirmed
	case stripego.PaymentIntentStatusRequiresAction:
		return p.refuseAuthentication(ctx, req, pi)
	case stripego.PaymentIntentStatusCanceled:
		return canceled(pi), nil
	case stripego.PaymentIntentStatusProcessing:
		return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: PaymentIntent %s is processing", payment.ErrOutcomeUnknown, pi.ID)
	}
	// requires_capture (chargeonce captures automatically) or a status this
	// code does not know: money may be held; an operator must look.
	p.log.ErrorContext(ctx, "the attempt's PaymentIntent is in a status chargeonce does not handle; the attempt stays PROCESSING",
		"payment_intent", pi.ID, "status", pi.Status, "provider_key", req.IdempotencyKey)
	return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: PaymentIntent %s is %s", payment.ErrOutcomeUnknown, pi.ID, pi.Status)
}

// refuseAuthentication answers a PaymentIntent that requires action (3-D
// Secure). chargeonce's API has no client-side step: nobody is given the
// client secret, and no page shows the bank's challenge. Left as it is, the
// PaymentIntent would wait for an authentication that never comes; so it is
// cancelled at Stripe, which makes sure it can never be completed, and the
// attempt fails with authentication_required. The cancel's idempotency key
// is derived from our provider key. If the cancel cannot be confirmed, the
// outcome stays unknown, and the reconciler's lookup finds the PaymentIntent
// and cancels it again.
func (p *Provider) refuseAuthentication(ctx context.Context, req payment.ProviderChargeRequest, pi *stripego.PaymentIntent) (payment.ProviderCharge, error) {
	params := &stripego.PaymentIntentCancelParams{
		CancellationReason: stripego.String(string(stripego.PaymentIntentCancellationReasonAbandoned)),
	}
	params.SetIdempotencyKey(req.IdempotencyKey + "_cancel")
	after, cancelErr := p.client.V1PaymentIntents.Cancel(ctx, pi.ID, params)
	if cancelErr != nil || replayed(after.LastResponse) {
		// Refused (it moved on: cancelled already, say), lost, or an earlier
		// cancel's saved answer: read it as it is now.
		var err error
		if after, err = p.retrieve(ctx, pi.ID); err != nil {
			return payment.ProviderCharge{}, err
		}
	}
	failed := payment.ProviderCharge{ID: pi.ID, FailureCode: CodeAuthenticationRequired,
		FailureMessage: shopperMessage(CodeAuthenticationRequired)}
	switch after.Status {
	case stripego.PaymentIntentStatusCanceled:
		return failed, nil
	case stripego.PaymentIntentStatusRequiresAction:
		var se *stripego.Error
		if errors.As(cancelErr, &se) && se.HTTPStatusCode >= 400 && se.HTTPStatusCode < 500 &&
			se.HTTPStatusCode != http.StatusConflict && se.HTTPStatusCode != http.StatusTooManyRequests {
			// Stripe refused the cancel for good. The PaymentIntent still
			// cannot be completed: that takes its client secret, which
			// chargeonce never hands out. Nothing was charged.
			p.log.WarnContext(ctx, "Stripe refused to cancel a PaymentIntent that requires authentication; failing the attempt all the same",
				"payment_intent", pi.ID, "provider_key", req.IdempotencyKey, "stripe_error", p.describe(cancelErr))
			return failed, nil
		}
		return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: PaymentIntent %s requires authentication and could not be cancelled yet",
			payment.ErrOutcomeUnknown, pi.ID)
	}
	return p.outcome(ctx, req, after)
}

// canceled is the outcome of a cancelled PaymentIntent: nothing was
// charged. chargeonce cancels only PaymentIntents that require
// authentication, with the reason "abandoned"; any other was cancelled by
// someone else.
func canceled(pi *stripego.PaymentIntent) payment.ProviderCharge {
	code := CodePaymentCanceled
	if pi.CancellationReason == stripego.PaymentIntentCancellationReasonAbandoned {
		code = CodeAuthenticationRequired
	}
	return payment.ProviderCharge{ID: pi.ID, FailureCode: code, FailureMessage: shopperMessage(code)}
}
