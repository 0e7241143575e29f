package graph

import (
	"chargeonce/graph/model"
	"chargeonce/payment"
)

// toPayload maps a domain result to the GraphQL payload.
func toPayload(r payment.Result) *model.ChargeCardPayload {
	p := &model.ChargeCardPayload{
		IdempotencyKey: r.IdempotencyKey,
		Status:         model.ChargeStatus(r.Status),
		Replayed:       r.Replayed,
	}
	if !r.ExpiresAt.IsZero() {
		t := r.ExpiresAt.UTC()
		p.ExpiresAt = &t
	}
	p.Charge = toCharge(r.Charge)
	if f := r.Failure; f != nil {
		p.Failure = &model.ChargeFailure{Code: f.Code, Message: f.Message}
	}
	if r.Status == payment.StatusProcessing {
		ms := retryAfterMs(r.RetryAfter)
		p.RetryAfterMs = &ms
	}
	if a := r.NextAction; a != nil {
		p.NextAction = &model.NextAction{Type: model.NextActionType(a.Type), URL: a.URL, ExpiresAt: a.ExpiresAt.UTC()}
	}
	return p
}

// toCharge maps a charge; nil for none.
func toCharge(c *payment.Charge) *model.Charge {
	if c == nil {
		return nil
	}
	return &model.Charge{
		ID:               c.ID.String(),
		Amount:           int(c.Amount),
		Currency:         c.Currency,
		OrderID:          optional(c.OrderID),
		ProviderChargeID: c.ProviderChargeID,
		CreatedAt:        c.CreatedAt.UTC(),
	}
}

// toSession maps a checkout session; secret is its client secret, shown
// only when given.
func toSession(s payment.CheckoutSession, secret string) *model.CheckoutSession {
	return &model.CheckoutSession{
		ID:           s.ID.String(),
		ClientSecret: optional(secret),
		Status:       model.CheckoutSessionStatus(s.Status),
		Amount:       int(s.Input.Amount),
		Currency:     s.Input.Currency,
		OrderID:      optional(s.Input.OrderID),
		Description:  optional(s.Input.Description),
		ReturnURL:    optional(s.Input.ReturnURL),
		CreatedAt:    s.CreatedAt.UTC(),
		ExpiresAt:    s.ExpiresAt.UTC(),
		Charge:       toCharge(s.Charge),
		Attempts:     s.Attempts,
		MaxAttempts:  s.MaxAttempts,
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
