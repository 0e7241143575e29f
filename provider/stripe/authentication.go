package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// 3-D Secure. A charge with a return URL is created and confirmed with
// return_url and without use_stripe_sdk, so that a card that needs the
// shopper's authentication leaves its PaymentIntent in requires_action
// with next_action.redirect_to_url: the bank's challenge page, which sends
// the shopper back to the return URL. That is a wait, not an outcome
// (payment.ProviderCharge.Action): chargeonce never sends the attempt
// again and only reads how it ended, by retrieving the PaymentIntent
// (succeeded; requires_payment_method with last_payment_error
// payment_intent_authentication_failure; canceled). After the window,
// CancelCharge cancels it as abandoned. A charge without a return URL has
// nowhere to bring the shopper back to: its PaymentIntent is cancelled at
// once and the attempt fails as authentication_required
// (refuseAuthentication).

// requiresAction answers a PaymentIntent that waits for the shopper: with a
// return URL and a redirect, the wait at the bank's page; otherwise a
// refusal, since no page of this checkout could show any other action.
func (p *Provider) requiresAction(ctx context.Context, req payment.ProviderChargeRequest, pi *stripego.PaymentIntent) (payment.ProviderCharge, error) {
	if req.ReturnURL == "" {
		return p.refuseAuthentication(ctx, req, pi)
	}
	if na := pi.NextAction; na != nil && na.RedirectToURL != nil && na.RedirectToURL.URL != "" {
		return payment.ProviderCharge{ID: pi.ID, Action: &payment.ProviderAction{URL: na.RedirectToURL.URL}}, nil
	}
	// Confirmed with a return_url and without use_stripe_sdk, a card's 3-D
	// Secure is a redirect; any other action needs Stripe.js.
	p.log.ErrorContext(ctx, "a PaymentIntent confirmed with a return_url requires an action that is not a redirect; cancelling it",
		"payment_intent", pi.ID, "next_action", nextActionType(pi), "provider_key", req.IdempotencyKey)
	return p.refuseAuthentication(ctx, req, pi)
}

func nextActionType(pi *stripego.PaymentIntent) string {
	if pi.NextAction == nil {
		return ""
	}
	return string(pi.NextAction.Type)
}

// refuseAuthentication answers a PaymentIntent that requires an action no
// shopper of this charge can be sent to: the charge has no return URL (or
// the action is not a redirect). Nobody is given the client secret, and no
// page shows the bank's challenge. Left as it is, the PaymentIntent would
// wait for an authentication that never comes; so it is cancelled at
// Stripe, which makes sure it can never be completed, and the attempt fails
// with authentication_required. The cancel's idempotency key is derived
// from our provider key. If the cancel cannot be confirmed, the outcome
// stays unknown, and the reconciler's lookup finds the PaymentIntent and
// cancels it again.
func (p *Provider) refuseAuthentication(ctx context.Context, req payment.ProviderChargeRequest, pi *stripego.PaymentIntent) (payment.ProviderCharge, error) {
	after, cancelErr := p.cancel(ctx, req, pi.ID)
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
		if refusedForGood(cancelErr) {
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

// CancelCharge implements payment.Provider: it reads PaymentIntent id and,
// while it waits for the shopper, cancels it as abandoned (with an
// idempotency key derived from our provider key), then returns it as it
// is: cancelled, a failure with authentication_abandoned. Stripe refuses
// the cancel of a PaymentIntent that ended meanwhile (400
// payment_intent_unexpected_state: the shopper came back from the bank
// just in time); it is then read, and returned as it ended, succeeded or
// failed. A PaymentIntent that still waits after
// the cancel, or an answer that is lost, is an error wrapping
// payment.ErrOutcomeUnknown: the reconciler asks again.
func (p *Provider) CancelCharge(ctx context.Context, req payment.ProviderChargeRequest, id string) (payment.ProviderCharge, error) {
	pi, err := p.retrieve(ctx, id)
	if err != nil {
		return payment.ProviderCharge{}, err
	}
	if pi.Status == stripego.PaymentIntentStatusRequiresAction {
		after, cancelErr := p.cancel(ctx, req, pi.ID)
		if cancelErr != nil || replayed(after.LastResponse) {
			// Refused because it ended meanwhile, lost, or an earlier
			// cancel's saved answer: read it as it is now.
			if after, err = p.retrieve(ctx, pi.ID); err != nil {
				return payment.ProviderCharge{}, err
			}
		}
		if after.Status == stripego.PaymentIntentStatusRequiresAction {
			if refusedForGood(cancelErr) {
				// The shopper can still complete it: never a failure on a guess.
				p.log.WarnContext(ctx, "Stripe refused to cancel a PaymentIntent that waits for authentication; it still waits",
					"payment_intent", pi.ID, "provider_key", req.IdempotencyKey, "stripe_error", p.describe(cancelErr))
			}
			return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: PaymentIntent %s still waits for the shopper after its cancel", payment.ErrOutcomeUnknown, pi.ID)
		}
		pi = after
	}
	pc, err := p.outcome(ctx, req, pi)
	if errors.Is(err, errUnconfirmed) {
		return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: PaymentIntent %s is %s, not confirmed", payment.ErrOutcomeUnknown, pi.ID, pi.Status)
	}
	return pc, err
}

// cancel cancels PaymentIntent id as abandoned, under an idempotency key
// derived from our provider key: the same parameters on every send.
func (p *Provider) cancel(ctx context.Context, req payment.ProviderChargeRequest, id string) (*stripego.PaymentIntent, error) {
	params := &stripego.PaymentIntentCancelParams{
		CancellationReason: stripego.String(string(stripego.PaymentIntentCancellationReasonAbandoned)),
	}
	params.SetIdempotencyKey(req.IdempotencyKey + "_cancel")
	return p.client.V1PaymentIntents.Cancel(ctx, id, params)
}

// refusedForGood reports whether Stripe refused a request for good: a 4xx
// other than 409 (a send of the key still runs) and 429.
func refusedForGood(err error) bool {
	var se *stripego.Error
	return errors.As(err, &se) && se.HTTPStatusCode >= 400 && se.HTTPStatusCode < 500 &&
		se.HTTPStatusCode != http.StatusConflict && se.HTTPStatusCode != http.StatusTooManyRequests
}

// canceled is the outcome of a cancelled PaymentIntent: nothing was
// charged. chargeonce cancels only PaymentIntents that wait for the
// shopper, with the reason "abandoned": for a charge with a return URL,
// nobody authenticated within the window (authentication_abandoned); for
// one without, it had nowhere to bring the shopper back to
// (authentication_required; so is the rare charge with a return URL whose
// action was not a redirect, when refuseAuthentication answers it). Any
// other was cancelled by someone else.
func canceled(req payment.ProviderChargeRequest, pi *stripego.PaymentIntent) payment.ProviderCharge {
	code := CodePaymentCanceled
	switch {
	case pi.CancellationReason != stripego.PaymentIntentCancellationReasonAbandoned:
	case req.ReturnURL != "":
		code = payment.FailureAuthenticationAbandoned
	default:
		code = CodeAuthenticationRequired
	}
	return payment.ProviderCharge{ID: pi.ID, FailureCode: code, FailureMessage: shopperMessage(code)}
}
