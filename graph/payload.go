package graph

import (
	"time"

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
	if c := r.Charge; c != nil {
		p.Charge = &model.Charge{
			ID:               c.ID.String(),
			Amount:           int(c.Amount),
			Currency:         c.Currency,
			OrderID:          optional(c.OrderID),
			ProviderChargeID: c.ProviderChargeID,
			CreatedAt:        c.CreatedAt.UTC(),
		}
	}
	if f := r.Failure; f != nil {
		p.Failure = &model.ChargeFailure{Code: f.Code, Message: f.Message}
	}
	if r.Status == payment.StatusProcessing {
		ms := int(r.RetryAfter / time.Millisecond)
		p.RetryAfterMs = &ms
	}
	return p
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
