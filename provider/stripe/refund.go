package stripe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/google/uuid"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// Refunds. A refund attempt is one Stripe Refund of the charge's
// PaymentIntent (the id CreateCharge returned), created under our provider
// key as Stripe's Idempotency-Key, the same on every send, so that a repeat
// gets the saved answer of the first send instead of refunding again; the
// attempt id in the refund's metadata finds it again whatever became of
// the answer (FindRefund). Stripe forgets a key after 24 hours, after
// which a send would refund again: FindRefund therefore never sends, and
// lists the PaymentIntent's refunds instead, which Stripe reads from its
// primary store, so that "none listed" proves there is none. A refund may
// stay pending for days; it is only ever read again.

// MetadataReason is the refund metadata key that holds the reason as the
// merchant gave it: Stripe's own reason takes only stripeReasons.
const MetadataReason = "reason"

// Failure codes of refunds of chargeonce's own, beside Stripe's error codes
// (charge_already_refunded, amount_too_large, …) and its refunds'
// failure_reason (expired_or_canceled_card, …).
const (
	// CodeRefundCanceled: the refund was cancelled at Stripe.
	CodeRefundCanceled = "canceled"
	// CodeRefundFailed: the refund failed, and Stripe said not why.
	CodeRefundFailed = "refund_failed"
)

// stripeReasons are the reasons Stripe's refunds take; any other reason is
// only in the metadata.
var stripeReasons = map[string]bool{
	string(stripego.RefundReasonDuplicate):           true,
	string(stripego.RefundReasonFraudulent):          true,
	string(stripego.RefundReasonRequestedByCustomer): true,
}

// refundMessages are fixed messages per refund failure code, as
// shopperMessages are for charges; Stripe's own text is never passed on.
var refundMessages = map[string]string{
	string(stripego.ErrorCodeChargeAlreadyRefunded):           "The charge has already been refunded in full. Nothing was refunded.",
	string(stripego.ErrorCodeAmountTooLarge):                  "The amount is more than remains to refund of the charge. Nothing was refunded.",
	string(stripego.ErrorCodeChargeDisputed):                  "The charge is disputed and cannot be refunded. Nothing was refunded.",
	CodeAmountNotSupported:                                    "The card provider cannot refund this amount in this currency. Nothing was refunded.",
	CodeCurrencyNotSupported:                                  "The card provider does not refund in this currency. Nothing was refunded.",
	CodeRefundCanceled:                                        "The refund was cancelled at the card provider. Nothing was refunded.",
	string(stripego.RefundFailureReasonExpiredOrCanceledCard): "The refund failed: the card is expired or closed. Nothing was refunded.",
	string(stripego.RefundFailureReasonLostOrStolenCard):      "The refund failed: the card was reported lost or stolen. Nothing was refunded.",
}

func refundMessage(code string) string {
	if m, ok := refundMessages[code]; ok {
		return m
	}
	return "The card provider did not refund the charge. Nothing was refunded."
}

func failedRefund(id, code string) payment.ProviderRefund {
	return payment.ProviderRefund{ID: id, State: payment.RefundFailed, FailureCode: code, FailureMessage: refundMessage(code)}
}

// CreateRefund implements payment.Provider: it refunds req.Amount of the
// charge's PaymentIntent under our provider key.
func (p *Provider) CreateRefund(ctx context.Context, req payment.ProviderRefundRequest) (payment.ProviderRefund, error) {
	if req.Amount <= 0 {
		// Stripe would refund all that is left: never on a missing amount.
		return payment.ProviderRefund{}, fmt.Errorf("stripe: refund of attempt %s: no amount", req.AttemptID)
	}
	amount, refusal, ok := stripeAmount(req.Amount, req.Currency)
	if !ok {
		return failedRefund("", refusal.FailureCode), nil
	}
	r, err := p.client.V1Refunds.Create(ctx, refundParams(req, amount))
	if err != nil {
		return p.refundCreateFailed(ctx, req, err)
	}
	if replayed(r.LastResponse) {
		// The refund as it was at the first send: read it as it is now.
		if r, err = p.retrieveRefund(ctx, r.ID); err != nil {
			return payment.ProviderRefund{}, err
		}
	}
	return p.refundOutcome(ctx, req, r)
}

// refundParams is the refund request of req: the same on every send, or
// Stripe refuses the repeat of our key (idempotency_error).
func refundParams(req payment.ProviderRefundRequest, amount int64) *stripego.RefundCreateParams {
	metadata := maps.Clone(req.Metadata)
	if metadata == nil {
		metadata = map[string]string{}
	}
	metadata[MetadataAttemptID] = req.AttemptID.String()
	if req.Reason != "" {
		metadata[MetadataReason] = req.Reason
	}
	params := &stripego.RefundCreateParams{Amount: stripego.Int64(amount), Metadata: metadata}
	if isPaymentIntent(req.ProviderChargeID) {
		params.PaymentIntent = stripego.String(req.ProviderChargeID)
	} else {
		params.Charge = stripego.String(req.ProviderChargeID)
	}
	if stripeReasons[req.Reason] {
		params.Reason = stripego.String(req.Reason)
	}
	params.SetIdempotencyKey(req.IdempotencyKey)
	return params
}

// isPaymentIntent reports whether a provider charge id names a
// PaymentIntent (what CreateCharge returns), not a Charge.
func isPaymentIntent(id string) bool { return strings.HasPrefix(id, "pi_") }

// refundCreateFailed maps an error of the refund's create call, as
// createFailed does a charge's.
func (p *Provider) refundCreateFailed(ctx context.Context, req payment.ProviderRefundRequest, err error) (payment.ProviderRefund, error) {
	v, se := classify(err)
	switch v {
	case verdictKeyRefused:
		return payment.ProviderRefund{}, p.callFailed(ctx, "create refund", err)
	case verdictKeySpent:
		return p.refundKeySpent(ctx, req, err)
	case verdictIdempotency:
		// A bug, or a deploy that changed the request while refunds were
		// open: never sent again under a new key, and no failure on a guess
		// either, since the first send may have refunded (FindRefund says).
		p.log.ErrorContext(ctx, "Stripe refused our provider key for a refund: it was first sent with other parameters; not sent again under a new key",
			"provider_key", req.IdempotencyKey, "attempt_id", req.AttemptID, "stripe_request_id", se.RequestID)
		return payment.ProviderRefund{}, fmt.Errorf("stripe: create refund: %s: provider key %s was first sent with other parameters",
			p.describe(err), req.IdempotencyKey)
	case verdictDeclined, verdictRejected:
		// charge_already_refunded, amount_too_large, charge_disputed, …:
		// nothing was refunded, and the same request would be refused again.
		p.log.WarnContext(ctx, "Stripe refused the refund request",
			"provider_key", req.IdempotencyKey, "stripe_code", se.Code, "stripe_param", se.Param, "stripe_request_id", se.RequestID)
		code := string(se.Code)
		if code == "" {
			code = CodeProviderRejected
		}
		return failedRefund("", code), nil
	}
	return payment.ProviderRefund{}, p.unknown("create refund", err)
}

// refundKeySpent handles a replayed 500 as keySpent does for a charge: the
// attempt's refund, if Stripe holds one, is the answer; only when it
// certainly holds none is the key spent.
func (p *Provider) refundKeySpent(ctx context.Context, req payment.ProviderRefundRequest, cause error) (payment.ProviderRefund, error) {
	r, err := p.refundLookup(ctx, req)
	if err != nil {
		return payment.ProviderRefund{}, err
	}
	if r != nil {
		return p.refundOutcome(ctx, req, r)
	}
	return payment.ProviderRefund{}, fmt.Errorf("%w: stripe: %s for provider key %s, and no refund for attempt %s",
		payment.ErrProviderKeySpent, p.describe(cause), req.IdempotencyKey, req.AttemptID)
}

// FindRefund implements payment.Provider: it lists the refunds of the
// charge's PaymentIntent and picks the attempt's by the attempt id in its
// metadata, whatever key it was created under; nil when there is none. It
// never sends a refund.
func (p *Provider) FindRefund(ctx context.Context, req payment.ProviderRefundRequest) (*payment.ProviderRefund, error) {
	r, err := p.refundLookup(ctx, req)
	if err != nil || r == nil {
		return nil, err
	}
	pr, err := p.refundOutcome(ctx, req, r)
	if err != nil {
		return nil, err
	}
	return &pr, nil
}

// refundLookup returns the attempt's refund as it is now; nil when Stripe
// certainly holds none.
func (p *Provider) refundLookup(ctx context.Context, req payment.ProviderRefundRequest) (*stripego.Refund, error) {
	if req.AttemptID == uuid.Nil || req.ProviderChargeID == "" {
		return nil, errors.New("stripe: look up refund: the request names no attempt or no charge")
	}
	params := &stripego.RefundListParams{}
	if isPaymentIntent(req.ProviderChargeID) {
		params.PaymentIntent = stripego.String(req.ProviderChargeID)
	} else {
		params.Charge = stripego.String(req.ProviderChargeID)
	}
	params.Limit = stripego.Int64(lookupPageSize)
	want := req.AttemptID.String()
	var found []*stripego.Refund
	for r, err := range p.client.V1Refunds.List(ctx, params).All(ctx) {
		if err != nil {
			return nil, p.callFailed(ctx, "list refunds of "+req.ProviderChargeID, err)
		}
		if r.Metadata[MetadataAttemptID] == want {
			found = append(found, r)
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	pick := found[0]
	for _, r := range found {
		if r.Status != stripego.RefundStatusFailed && r.Status != stripego.RefundStatusCanceled {
			pick = r
			break
		}
	}
	if len(found) > 1 {
		// One attempt, one refund: more is a bug, and may have refunded
		// twice. Settle on the (newest) one that still holds money back.
		p.log.ErrorContext(ctx, "Stripe holds several refunds for one refund attempt",
			"attempt_id", want, "refunds", len(found), "settled_on", pick.ID)
	}
	return pick, nil
}

// retrieveRefund reads a refund by id, as it is now.
func (p *Provider) retrieveRefund(ctx context.Context, id string) (*stripego.Refund, error) {
	r, err := p.client.V1Refunds.Retrieve(ctx, id, nil)
	if err != nil {
		return nil, p.callFailed(ctx, "retrieve refund "+id, err)
	}
	return r, nil
}

// refundOutcome maps a refund, as it is now, to the attempt's outcome.
func (p *Provider) refundOutcome(ctx context.Context, req payment.ProviderRefundRequest, r *stripego.Refund) (payment.ProviderRefund, error) {
	switch r.Status {
	case stripego.RefundStatusPending, stripego.RefundStatusRequiresAction:
		return payment.ProviderRefund{ID: r.ID, State: payment.RefundPending}, nil
	case stripego.RefundStatusSucceeded:
		return payment.ProviderRefund{ID: r.ID, State: payment.RefundSucceeded}, nil
	case stripego.RefundStatusFailed:
		return failedRefund(r.ID, cmp.Or(string(r.FailureReason), CodeRefundFailed)), nil
	case stripego.RefundStatusCanceled:
		return failedRefund(r.ID, cmp.Or(string(r.FailureReason), CodeRefundCanceled)), nil
	}
	p.log.ErrorContext(ctx, "the attempt's refund is in a status chargeonce does not handle; the attempt stays PROCESSING",
		"refund", r.ID, "status", r.Status, "provider_key", req.IdempotencyKey)
	return payment.ProviderRefund{}, fmt.Errorf("%w: stripe: refund %s is %s", payment.ErrOutcomeUnknown, r.ID, r.Status)
}
