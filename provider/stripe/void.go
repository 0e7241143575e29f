package stripe

import (
	"context"
	"time"

	"github.com/google/uuid"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// Voids. A void attempt cancels the authorization's PaymentIntent (POST
// /v1/payment_intents/{id}/cancel, cancellation_reason
// requested_by_customer) under our provider key, the same on every send. A
// cancel takes no metadata, and needs none: a PaymentIntent cancelled
// after its card was authorized, for any reason but the authorization's
// lapse, holds a voided authorization (authorizationOf), and the void is
// that. FindVoid reads the PaymentIntent, never sending. VoidCharge reads
// it first: a void already made is answered without sending, and one of an
// authorization that lapsed or has a capture is refused without sending
// (authorization_expired, charge_captured), since a cancel after a capture
// would only release what remains, which is no void. A void's id is
// derived, <PaymentIntent id>:void:<attempt id>, the same on every read.

// Fixed messages of refused voids, per failure code.
var voidMessages = map[string]string{
	payment.FailureChargeCaptured:       "The authorization has a capture and can no longer be voided; refund the capture instead. Nothing was voided.",
	payment.FailureAuthorizationExpired: "The authorization expired before the void: its money was released already. Nothing was voided.",
	payment.FailureChargeNotCapturable:  "The charge is no authorization and cannot be voided. Nothing was voided.",
	CodeProviderRejected:                "The card provider refused the void request. Nothing was voided.",
}

func refusedVoid(code string) payment.ProviderVoid {
	return payment.ProviderVoid{FailureCode: code, FailureMessage: voidMessages[code]}
}

// VoidCharge implements payment.Provider: it cancels the PaymentIntent
// req.ProviderChargeID under our provider key, unless it is voided, has
// lapsed or has a capture already.
func (p *Provider) VoidCharge(ctx context.Context, req payment.ProviderVoidRequest) (payment.ProviderVoid, error) {
	pi, err := p.retrieve(ctx, req.ProviderChargeID)
	if err != nil {
		return payment.ProviderVoid{}, err
	}
	if pv, done := voidAnswer(pi, req.AttemptID); done {
		return pv, nil
	}
	return p.sendVoid(ctx, req, pi.ID)
}

// sendVoid sends the cancel of PaymentIntent id.
func (p *Provider) sendVoid(ctx context.Context, req payment.ProviderVoidRequest, id string) (payment.ProviderVoid, error) {
	params := &stripego.PaymentIntentCancelParams{
		CancellationReason: stripego.String(string(stripego.PaymentIntentCancellationReasonRequestedByCustomer)),
	}
	params.SetIdempotencyKey(req.IdempotencyKey)
	_, sendErr := p.client.V1PaymentIntents.Cancel(ctx, id, params)
	if sendErr == nil {
		return madeVoid(id, req.AttemptID), nil
	}
	// Whether it was voided after all, or why not, is in its state.
	op := "cancel PaymentIntent " + id
	v, se, pi, err := p.readAfterRefusal(ctx, op, id, sendErr)
	if err != nil {
		return payment.ProviderVoid{}, err
	}
	if pv, done := voidAnswer(pi, req.AttemptID); done {
		return pv, nil
	}
	if err := p.keyRefused(ctx, v, se, op, sendErr, req.IdempotencyKey, req.AttemptID); err != nil {
		return payment.ProviderVoid{}, err
	}
	p.log.WarnContext(ctx, "Stripe refused the void request",
		"provider_key", req.IdempotencyKey, "payment_intent", id, "status", pi.Status,
		"stripe_code", se.Code, "stripe_param", se.Param, "stripe_request_id", se.RequestID)
	return refusedVoid(CodeProviderRejected), nil
}

// voidAnswer is the answer to a void of pi that its state gives without
// sending: made (it is voided), or refused; done is false while pi is an
// open authorization with nothing captured, which a cancel voids.
func voidAnswer(pi *stripego.PaymentIntent, id uuid.UUID) (pv payment.ProviderVoid, done bool) {
	auth, ok := authorizationOf(pi, time.Now())
	switch {
	case !ok:
		return refusedVoid(payment.FailureChargeNotCapturable), true
	case auth.State == payment.AuthorizationVoided:
		return madeVoid(pi.ID, id), true
	case auth.State == payment.AuthorizationExpired:
		return refusedVoid(payment.FailureAuthorizationExpired), true
	case auth.State == payment.AuthorizationCaptured || auth.Captured > 0:
		return refusedVoid(payment.FailureChargeCaptured), true
	}
	return payment.ProviderVoid{}, false
}

// FindVoid implements payment.Provider: the void, when the PaymentIntent
// holds a voided authorization; nil otherwise. It never sends.
func (p *Provider) FindVoid(ctx context.Context, req payment.ProviderVoidRequest) (*payment.ProviderVoid, error) {
	pi, err := p.retrieve(ctx, req.ProviderChargeID)
	if err != nil {
		return nil, err
	}
	if auth, ok := authorizationOf(pi, time.Now()); !ok || auth.State != payment.AuthorizationVoided {
		return nil, nil
	}
	v := madeVoid(pi.ID, req.AttemptID)
	return &v, nil
}

// madeVoid is the void of attempt id of PaymentIntent pi.
func madeVoid(pi string, id uuid.UUID) payment.ProviderVoid {
	return payment.ProviderVoid{ID: pi + ":void:" + id.String(), Succeeded: true}
}
