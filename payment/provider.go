package payment

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"chargeonce/metrics"
)

// ErrOutcomeUnknown means the provider may or may not have charged: the
// request timed out, the connection dropped, or the provider answered 5xx.
// Such an attempt stays PROCESSING; it is never marked FAILED on a guess.
var ErrOutcomeUnknown = errors.New("provider outcome unknown")

// ErrProviderKeySpent means that no send under the request's provider key
// can ever charge: the provider saved a failure for the key and replays it
// on every send (Stripe does so with a 500), and it certainly holds no charge
// for the attempt under any key. Only then may the attempt be sent again
// under a new provider key, which settle records on the attempt first.
var ErrProviderKeySpent = errors.New("provider key spent: the provider replays a failure for it and holds no charge for the attempt")

// ProviderChargeRequest asks the provider to charge a card once per
// IdempotencyKey (our provider key, not the client's key).
type ProviderChargeRequest struct {
	IdempotencyKey string
	// AttemptID and AttemptCreatedAt name the attempt whatever its provider
	// key, for a provider that finds charges by the attempt (the id is also
	// in Metadata as chargeonce_attempt_id); no charge for the attempt is
	// older than AttemptCreatedAt.
	AttemptID        uuid.UUID
	AttemptCreatedAt time.Time
	Amount           int64
	Currency         string
	PaymentMethod    string
	Description      string
	Metadata         map[string]string
}

// ProviderCharge is the provider's definitive answer.
type ProviderCharge struct {
	ID             string
	Succeeded      bool
	FailureCode    string // set when !Succeeded
	FailureMessage string
}

// Provider is a card provider that deduplicates on the idempotency key.
type Provider interface {
	// CreateCharge charges the card, or returns the charge already made under
	// the same idempotency key. A decline is a ProviderCharge with Succeeded
	// false, not an error; an error wrapping ErrOutcomeUnknown means nobody
	// knows yet.
	CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error)
	// FindCharge looks up the charge that req made, by its idempotency key
	// or by its attempt; nil when the provider has none. It is given the
	// whole request so that a provider may also send it again or search by
	// the attempt.
	FindCharge(ctx context.Context, req ProviderChargeRequest) (*ProviderCharge, error)
}

// instrumented is a Provider that times and counts every call.
type instrumented struct {
	Provider
	m *metrics.Metrics
}

func instrument(p Provider, m *metrics.Metrics) Provider { return instrumented{Provider: p, m: m} }

func (p instrumented) CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error) {
	start := time.Now()
	pc, err := p.Provider.CreateCharge(ctx, req)
	result := "ok"
	switch {
	case err != nil && errors.Is(err, ErrOutcomeUnknown):
		result = "unknown"
	case err != nil && errors.Is(err, ErrProviderKeySpent):
		result = "key_spent"
	case err != nil:
		result = "error"
	case !pc.Succeeded:
		result = "declined"
	}
	p.observe("create_charge", result, start)
	return pc, err
}

func (p instrumented) FindCharge(ctx context.Context, req ProviderChargeRequest) (*ProviderCharge, error) {
	start := time.Now()
	pc, err := p.Provider.FindCharge(ctx, req)
	result := "ok"
	switch {
	case err != nil:
		result = "error"
	case pc == nil:
		result = "not_found"
	}
	p.observe("find_charge", result, start)
	return pc, err
}

func (p instrumented) observe(operation, result string, start time.Time) {
	p.m.ProviderDuration.WithLabelValues(operation, result).Observe(time.Since(start).Seconds())
	if result == "unknown" || result == "error" || result == "key_spent" {
		p.m.ProviderErrors.WithLabelValues(operation).Inc()
	}
}
