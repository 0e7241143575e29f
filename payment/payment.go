// Package payment is chargeonce's domain: it charges a card at most once per
// idempotency key. A request first claims its key in PostgreSQL (an atomic
// insert on a unique index), and only the request that claimed it calls the
// card provider, with an idempotency key of our own; the outcome is stored and
// every later request with the same key gets the stored result. This package
// holds that claim → charge → finalize flow, the validation and fingerprint of
// requests, the Provider interface with its HTTP client, and the merchants and
// API keys that scope every idempotency key.
package payment

import (
	"time"

	"github.com/google/uuid"
)

// Status is where a charge attempt stands.
type Status string

const (
	StatusProcessing Status = "PROCESSING"
	StatusSucceeded  Status = "SUCCEEDED"
	StatusFailed     Status = "FAILED"
)

// Merchant is the tenant that owns idempotency keys and charges.
type Merchant struct {
	ID   uuid.UUID
	Name string
}

// ChargeInput is what a client asks to charge. Empty OrderID and Description
// mean "not given".
type ChargeInput struct {
	Amount        int64
	Currency      string
	PaymentMethod string
	OrderID       string
	Description   string
}

// Result is the answer to a charge request or a status query.
type Result struct {
	IdempotencyKey string
	Status         Status
	// Replayed is true when the answer is the stored result of an earlier request.
	Replayed bool
	Charge   *Charge  // set when SUCCEEDED
	Failure  *Failure // set when FAILED
	// RetryAfter is set when PROCESSING: when to poll or retry.
	RetryAfter time.Duration
	ExpiresAt  time.Time
}

// Charge is money that moved.
type Charge struct {
	ID               uuid.UUID
	Amount           int64
	Currency         string
	OrderID          string
	ProviderChargeID string
	CreatedAt        time.Time
}

// Failure says why nothing was charged.
type Failure struct {
	Code    string
	Message string
}
