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

// Kind is what an attempt does at the provider. Every kind is claimed,
// leased, fenced, settled, replayed and forgotten by the same engine; only
// its operation differs (operation.go), and each kind has its own file.
type Kind string

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
	// CheckoutSessionID is the checkout session the charge pays; zero for
	// none. Its terms are the fields above (ChargeCheckoutSession).
	CheckoutSessionID uuid.UUID
	// ReturnURL opts the charge in to customer authentication (3-D
	// Secure): where the provider sends the shopper back. Empty: a card
	// that needs authentication fails with authentication_required.
	ReturnURL string
	// CaptureMethod is CaptureManual for a charge that only authorizes,
	// captured later (CaptureCharge) or voided (VoidCharge); empty or
	// CaptureAutomatic takes the money at once.
	CaptureMethod CaptureMethod
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
	// NextAction is set while PROCESSING when the shopper must
	// authenticate: the same on every answer until the attempt is final.
	NextAction *NextAction
	// Refund is set when a refund attempt SUCCEEDED; Capture when a
	// capture attempt did, Void when a void attempt did.
	Refund  *Refund
	Capture *Capture
	Void    *Void
	// Replay is set on a replay of a settled attempt (one that can never
	// change): its answer may be given again as it is (from memory while
	// the instance keeps finished results, from the database through
	// KeepAnswer), each time counted by Service.Replayed, until the result
	// expires.
	Replay *Replay
}

// RefundInput is what a merchant asks to refund: Amount of the charge
// ChargeID, or, when Amount is 0, what remains refundable at the claim.
type RefundInput struct {
	ChargeID uuid.UUID
	Amount   int64
	Reason   string
}

// Refund is money that went back. Its Status is SUCCEEDED, or FAILED when
// a refund that succeeded failed later (the card was closed; Failure says
// why): its amount is refundable again.
type Refund struct {
	ID               uuid.UUID
	ChargeID         uuid.UUID
	Amount           int64
	Currency         string
	Reason           string
	ProviderRefundID string
	Status           Status
	Failure          *Failure
	CreatedAt        time.Time
}

// NextActionType is what kind of step the shopper must take.
type NextActionType string

// NextActionRedirect: send the shopper's browser to URL; the provider sends
// them back to the charge's returnUrl.
const NextActionRedirect NextActionType = "REDIRECT"

// NextAction is the step the shopper must take before a waiting attempt
// can complete, and until when: after ExpiresAt the payment is cancelled
// as abandoned.
type NextAction struct {
	Type      NextActionType
	URL       string
	ExpiresAt time.Time
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
