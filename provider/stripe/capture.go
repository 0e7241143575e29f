package stripe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// Captures. A capture attempt is one POST /v1/payment_intents/{id}/capture
// of amount_to_capture under our provider key, the same on every send.
// Stripe keeps no object for a capture, to list or to read: so the capture
// writes its own mark into the PaymentIntent's metadata, in the same
// request (MetadataCapturePrefix + the attempt id = the amount), and the
// mark is there exactly when the capture was made. FindCapture reads the
// PaymentIntent and finds the mark; it never sends. CaptureCharge reads it
// first too and answers a capture already made without sending it again:
// Stripe forgets a key after 24 hours, after which a send would capture
// again. A capture's id is derived, <PaymentIntent id>:capture:<attempt
// id>, the same on every read.
//
// A capture that is not final keeps the rest of the authorization for
// later captures (final_capture=false) where Stripe says the authorization
// can be captured in parts (multicapture). Elsewhere Stripe releases what
// a capture does not take, so a capture that is not final and takes less
// than is capturable is refused before it is sent: it would release the
// rest silently. A PaymentIntent's metadata holds at most 50 keys, so an
// authorization takes about 45 captures at most; Stripe's own limit is 50.

// MetadataCapturePrefix, followed by a capture attempt's id, is the
// PaymentIntent metadata key of the capture's mark. Stripe's keys are at
// most 40 characters: the prefix and a UUID are exactly that.
const MetadataCapturePrefix = "cap_"

// captureMarkFinal ends the mark of a final capture: a PaymentIntent that
// took less than it authorized without one lapsed (authorizationOf).
const captureMarkFinal = " final"

// Fixed messages of refused captures, per failure code; Stripe's own text
// is never passed on.
var captureMessages = map[string]string{
	payment.FailureAuthorizationExpired:        "The authorization expired before the capture. Nothing was captured.",
	payment.FailureCaptureExceedsAuthorization: "The amount is more than remains capturable of the authorization. Nothing was captured.",
	payment.FailureChargeNotCapturable:         "The charge cannot be captured: it was captured in full, its final capture was made, or it is no authorization. Nothing was captured.",
	payment.FailureChargeVoided:                "The authorization was voided. Nothing was captured.",
	CodeProviderRejected:                       "The card provider refused the capture request. Nothing was captured.",
	CodeAmountNotSupported:                     "The card provider cannot capture this amount in this currency. Nothing was captured.",
	CodeCurrencyNotSupported:                   "The card provider does not capture in this currency. Nothing was captured.",
}

// messageNoMulticapture refuses a capture that is not final and takes less
// than is capturable, where Stripe cannot capture in parts.
const messageNoMulticapture = "This Stripe account cannot capture this authorization in parts (multicapture is not available for it), " +
	"so a capture that is not final would release the rest: make it the final capture, or capture all that remains. Nothing was captured."

func refusedCapture(code string) payment.ProviderCapture {
	m, ok := captureMessages[code]
	if !ok {
		m = "The card provider declined the capture. Nothing was captured."
	}
	return payment.ProviderCapture{FailureCode: code, FailureMessage: m}
}

// CaptureCharge implements payment.Provider: it captures req.Amount of the
// PaymentIntent req.ProviderChargeID under our provider key, unless the
// PaymentIntent holds the attempt's capture already.
func (p *Provider) CaptureCharge(ctx context.Context, req payment.ProviderCaptureRequest) (payment.ProviderCapture, error) {
	if req.Amount <= 0 {
		// Stripe would capture all that is capturable: never on a missing amount.
		return payment.ProviderCapture{}, fmt.Errorf("stripe: capture of attempt %s: no amount", req.AttemptID)
	}
	amount, refusal, ok := stripeAmount(req.Amount, req.Currency)
	if !ok {
		return refusedCapture(refusal.FailureCode), nil
	}
	pi, err := p.retrieve(ctx, req.ProviderChargeID)
	if err != nil {
		return payment.ProviderCapture{}, err
	}
	if captureMarked(pi, req.AttemptID) {
		return madeCapture(pi.ID, req.AttemptID), nil
	}
	multicapture := multicaptureAvailable(pi)
	if pi.Status == stripego.PaymentIntentStatusRequiresCapture && !req.Final && !multicapture && amount < pi.AmountCapturable {
		p.log.WarnContext(ctx, "refused a capture that is not final: Stripe cannot capture this authorization in parts (multicapture is not available), and would release the rest",
			"payment_intent", pi.ID, "provider_key", req.IdempotencyKey, "attempt_id", req.AttemptID)
		return payment.ProviderCapture{FailureCode: payment.FailureChargeNotCapturable, FailureMessage: messageNoMulticapture}, nil
	}
	return p.sendCapture(ctx, req, pi.ID, captureParams(req, amount, multicapture))
}

// captureParams is the capture request of req, amount in Stripe's unit:
// the same on every send, or Stripe refuses the repeat of our key.
// Whether multicapture is available is the authorization's, so it never
// changes between sends.
func captureParams(req payment.ProviderCaptureRequest, amount int64, multicapture bool) *stripego.PaymentIntentCaptureParams {
	mark := strconv.FormatInt(amount, 10)
	if req.Final {
		mark += captureMarkFinal
	}
	params := &stripego.PaymentIntentCaptureParams{
		AmountToCapture: stripego.Int64(amount),
		Metadata:        map[string]string{captureMarkKey(req.AttemptID): mark},
	}
	if !req.Final && multicapture {
		params.FinalCapture = stripego.Bool(false)
	}
	params.SetIdempotencyKey(req.IdempotencyKey)
	return params
}

// sendCapture sends the capture of PaymentIntent id.
func (p *Provider) sendCapture(ctx context.Context, req payment.ProviderCaptureRequest, id string, params *stripego.PaymentIntentCaptureParams) (payment.ProviderCapture, error) {
	_, sendErr := p.client.V1PaymentIntents.Capture(ctx, id, params)
	if sendErr == nil {
		return madeCapture(id, req.AttemptID), nil
	}
	// Whether this attempt's capture was made after all (by a send whose
	// answer was lost, say) is in its mark.
	op := "capture PaymentIntent " + id
	v, se, pi, err := p.readAfterRefusal(ctx, op, id, sendErr)
	switch {
	case err != nil:
		return payment.ProviderCapture{}, err
	case captureMarked(pi, req.AttemptID):
		return madeCapture(pi.ID, req.AttemptID), nil
	}
	if err := p.keyRefused(ctx, v, se, op, sendErr, req.IdempotencyKey, req.AttemptID); err != nil {
		return payment.ProviderCapture{}, err
	}
	return p.captureRefused(ctx, req, se, pi), nil
}

// captureRefused maps Stripe's refusal of a capture, pi being the
// PaymentIntent as it is now: nothing was captured.
func (p *Provider) captureRefused(ctx context.Context, req payment.ProviderCaptureRequest, se *stripego.Error, pi *stripego.PaymentIntent) payment.ProviderCapture {
	if se.Type == stripego.ErrorTypeCard {
		return refusedCapture(declined(pi.ID, se).FailureCode)
	}
	switch se.Code {
	case stripego.ErrorCodeAmountTooLarge:
		return refusedCapture(payment.FailureCaptureExceedsAuthorization)
	case stripego.ErrorCodeChargeExpiredForCapture:
		return refusedCapture(payment.FailureAuthorizationExpired)
	case stripego.ErrorCodePaymentIntentUnexpectedState:
		auth, ok := authorizationOf(pi, time.Now())
		switch {
		case !ok || auth.State == payment.AuthorizationCaptured:
			return refusedCapture(payment.FailureChargeNotCapturable)
		case auth.State == payment.AuthorizationExpired:
			return refusedCapture(payment.FailureAuthorizationExpired)
		case auth.State == payment.AuthorizationVoided:
			return refusedCapture(payment.FailureChargeVoided)
		}
		// Still open: Stripe refused it in a state that has passed. Its
		// refusal is saved for our key, so a resend would get it again.
	}
	p.log.WarnContext(ctx, "Stripe refused the capture request",
		"provider_key", req.IdempotencyKey, "payment_intent", pi.ID, "status", pi.Status,
		"stripe_code", se.Code, "stripe_param", se.Param, "stripe_request_id", se.RequestID)
	return refusedCapture(CodeProviderRejected)
}

// FindCapture implements payment.Provider: it reads the PaymentIntent and
// finds the attempt's capture by its mark; nil when there is none. It never
// sends.
func (p *Provider) FindCapture(ctx context.Context, req payment.ProviderCaptureRequest) (*payment.ProviderCapture, error) {
	pi, err := p.retrieve(ctx, req.ProviderChargeID)
	if err != nil || !captureMarked(pi, req.AttemptID) {
		return nil, err
	}
	c := madeCapture(pi.ID, req.AttemptID)
	return &c, nil
}

// captureMarkKey is the metadata key of the mark of capture attempt id.
func captureMarkKey(id uuid.UUID) string { return MetadataCapturePrefix + id.String() }

// captureMarked reports whether pi holds the capture of attempt id.
func captureMarked(pi *stripego.PaymentIntent, id uuid.UUID) bool {
	return pi.Metadata[captureMarkKey(id)] != ""
}

// finalCaptureMarked reports whether pi holds a final capture of ours.
func finalCaptureMarked(pi *stripego.PaymentIntent) bool {
	for k, v := range pi.Metadata {
		if strings.HasPrefix(k, MetadataCapturePrefix) && strings.HasSuffix(v, captureMarkFinal) {
			return true
		}
	}
	return false
}

// madeCapture is the capture of attempt id of PaymentIntent pi.
func madeCapture(pi string, id uuid.UUID) payment.ProviderCapture {
	return payment.ProviderCapture{ID: pi + ":capture:" + id.String(), Succeeded: true}
}
