package providertest

import (
	"context"
	"fmt"
	"maps"
	"time"

	"chargeonce/payment"
)

// memRefund is a refund Memory holds.
type memRefund struct {
	made
	req    payment.ProviderRefundRequest // as first sent
	amount int64
	// state is the refund's state until settlesAt, and settlesTo from then
	// on (stateAt).
	state     payment.RefundState
	settlesAt time.Time
	settlesTo payment.RefundState
}

// stateAt is where r stands at now.
func (r *memRefund) stateAt(now time.Time) payment.RefundState {
	if r.state == payment.RefundPending && !now.Before(r.settlesAt) {
		return r.settlesTo
	}
	return r.state
}

// holds reports whether r holds its amount against its charge at now:
// pending or succeeded, not failed.
func (r *memRefund) holds(now time.Time) bool { return r.stateAt(now) != payment.RefundFailed }

// view is r as the provider answers it at now.
func (r *memRefund) view(now time.Time) payment.ProviderRefund {
	pr := payment.ProviderRefund{ID: r.id, State: r.stateAt(now)}
	if pr.State == payment.RefundFailed {
		pr.FailureCode = "expired_or_canceled_card"
		pr.FailureMessage = "The refund failed: the card it went back to is expired or canceled."
	}
	return pr
}

// refusedRefund is a refund the provider refuses: nothing is stored, and
// the same request later is decided anew.
func refusedRefund(code, message string) payment.ProviderRefund {
	return payment.ProviderRefund{State: payment.RefundFailed, FailureCode: code, FailureMessage: message}
}

// CreateRefund implements payment.Provider, as the simulator refunds: of a
// succeeded charge (of an authorization, what its captures took), req.Amount
// or, when zero, what remains; more than remains is refused. The charge's
// card decides how its refunds end.
func (m *Memory) CreateRefund(_ context.Context, req payment.ProviderRefundRequest) (payment.ProviderRefund, error) {
	m.record(req.IdempotencyKey)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if r, ok := m.refunds.byKey[req.IdempotencyKey]; ok {
		if !sameRefund(r.req, req) {
			return payment.ProviderRefund{}, fmt.Errorf("providertest: key %s was used with other parameters (409): %w",
				req.IdempotencyKey, payment.ErrOutcomeUnknown)
		}
		return r.view(now), nil
	}
	c := m.chargeByID[req.ProviderChargeID]
	if c == nil {
		return refusedRefund("resource_missing", fmt.Sprintf("No such charge: %q.", req.ProviderChargeID)), nil
	}
	if c.status != chargeSucceeded {
		return refusedRefund("charge_not_refundable", fmt.Sprintf(
			"This charge's status is %s: only a charge that is %s can be refunded.", c.status, chargeSucceeded)), nil
	}
	refundable := c.req.Amount
	if c.auth != nil {
		refundable = c.auth.captured // of an authorization, only what its captures took was charged
	}
	if refundable == 0 {
		return refusedRefund("charge_not_refundable", "Nothing of this authorization was captured: there is nothing to refund."), nil
	}
	var held int64
	refunds := m.refunds.of(c.id)
	for _, r := range refunds {
		if r.holds(now) {
			held += r.amount
		}
	}
	remaining := refundable - held
	amount := req.Amount
	switch {
	case amount == 0 && remaining == 0:
		return refusedRefund("charge_already_refunded", "This charge has already been refunded in full."), nil
	case amount == 0:
		amount = remaining
	case amount > remaining:
		return refusedRefund("amount_too_large", fmt.Sprintf(
			"The refund of %d is greater than what remains of the charge, %d.", amount, remaining)), nil
	}
	later, settlesTo := c.card.refundOutcome(len(refunds) == 0)
	req.Metadata = maps.Clone(req.Metadata)
	r := &memRefund{made: made{id: newID("re_"), chargeID: c.id, attemptID: req.AttemptID}, req: req, amount: amount,
		state: settlesTo, settlesAt: now, settlesTo: settlesTo}
	if later {
		r.state, r.settlesAt = payment.RefundPending, now.Add(m.refundSettle)
	}
	m.refunds.add(req.IdempotencyKey, r)
	return r.view(now), nil
}

// sameRefund reports whether b asks for what a asked, as the simulator
// compares what a refund's request sends.
func sameRefund(a, b payment.ProviderRefundRequest) bool {
	return a.ProviderChargeID == b.ProviderChargeID && a.Amount == b.Amount && a.Reason == b.Reason &&
		maps.Equal(a.Metadata, b.Metadata)
}

// FindRefund implements payment.Provider: the refund of req's key, or
// else the one of the charge's that req's attempt sent; nil when there is
// none.
func (m *Memory) FindRefund(_ context.Context, req payment.ProviderRefundRequest) (*payment.ProviderRefund, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	return foundIn(&m.refunds, req.IdempotencyKey, req.AttemptID, req.ProviderChargeID,
		func(r *memRefund) payment.ProviderRefund { return r.view(now) }), nil
}
