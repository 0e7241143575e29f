package graph

import (
	"context"

	"github.com/google/uuid"

	"chargeonce/graph/model"
	"chargeonce/payment"
)

// refundCharge refunds input under key, with a secret key only.
func (r *Resolver) refundCharge(ctx context.Context, key string, input model.RefundInput) (*model.RefundPayload, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireSecret(st, "refundCharge"); err != nil {
		return nil, err
	}
	in := payment.RefundInput{Reason: deref(input.Reason)}
	if in.ChargeID, err = chargeID(input.ChargeID, "input.chargeId"); err != nil {
		return nil, err
	}
	if input.Amount != nil {
		if *input.Amount < payment.MinAmount {
			return nil, payment.Invalid("input.amount", "amount must be at least %d minor unit; leave it out to refund what remains", payment.MinAmount)
		}
		in.Amount = int64(*input.Amount)
	}
	res, err := r.Payments.RefundCharge(ctx, m, key, in)
	if err != nil {
		return nil, err
	}
	return RefundPayload(res), nil
}

// refundStatus is the state of the refund made with key, with a secret
// key only; nil for a key never used for a refund.
func (r *Resolver) refundStatus(ctx context.Context, key string) (*model.RefundPayload, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireSecret(st, "refundStatus"); err != nil {
		return nil, err
	}
	res, err := r.Payments.RefundStatus(ctx, m, key)
	if err != nil || res == nil {
		return nil, err
	}
	return RefundPayload(*res), nil
}

// chargeRefunds is what the caller's charge has refunded, and its refunds.
func (r *Resolver) chargeRefunds(ctx context.Context, charge *model.Charge) (int64, []payment.Refund, error) {
	m, _, err := r.caller(ctx)
	if err != nil {
		return 0, nil, err
	}
	id, err := chargeID(charge.ID, "id")
	if err != nil {
		return 0, nil, err
	}
	return r.Payments.Refunds(ctx, m, id)
}

// chargeID parses a charge's id given as field.
func chargeID(raw, field string) (uuid.UUID, error) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, payment.Invalid(field, "%s is not a charge id: pass Charge.id, a UUID", field)
	}
	return id, nil
}

// RefundPayload maps a refund attempt's result to the GraphQL payload, which
// the demo's shop backend answers too.
func RefundPayload(r payment.Result) *model.RefundPayload {
	p := &model.RefundPayload{
		IdempotencyKey: r.IdempotencyKey,
		Status:         model.RefundStatus(r.Status),
		Replayed:       r.Replayed,
		Refund:         toRefund(r.Refund),
	}
	p.RetryAfterMs, p.ExpiresAt = Hints(r)
	if f := r.Failure; f != nil {
		p.Failure = &model.RefundFailure{Code: f.Code, Message: f.Message}
	}
	return p
}

// toRefund maps a refund; nil for none.
func toRefund(r *payment.Refund) *model.Refund {
	if r == nil {
		return nil
	}
	return &model.Refund{
		ID:               r.ID.String(),
		ChargeID:         r.ChargeID.String(),
		Amount:           int(r.Amount),
		Currency:         r.Currency,
		Reason:           optional(r.Reason),
		ProviderRefundID: optional(r.ProviderRefundID),
		Status:           model.RefundStatus(r.Status),
		CreatedAt:        r.CreatedAt.UTC(),
	}
}
