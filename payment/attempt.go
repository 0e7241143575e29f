package payment

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Attempt is one charge attempt: a merchant's claim of an idempotency key,
// the request it was claimed for, who holds it, and where it stands. The
// store alone converts it to and from database rows.
type Attempt struct {
	ID             uuid.UUID
	Kind           Kind
	MerchantID     uuid.UUID
	IdempotencyKey string
	// KeySession is the checkout session whose keys IdempotencyKey is
	// among: a page's attempt, made on the session with a publishable key.
	// uuid.Nil for the merchant's own keys, which its server sends.
	KeySession uuid.UUID
	Input      ChargeInput
	// Fingerprint identifies Input (see Fingerprint): the same key with
	// another request is refused.
	Fingerprint []byte
	Status      Status
	// ProviderKey is our idempotency key at the card provider, the same on
	// every send for the life of the attempt; it is replaced only when the
	// provider has spent it (see ErrProviderKeySpent and nextProviderKey).
	ProviderKey string
	// Number counts the attempt's holders: 1 for the request that claimed
	// it, one more for each takeover. Finalizing writes are fenced on it, so
	// a holder that lost the attempt writes nothing.
	Number int32
	// LockedUntil is when the holder's lease ends; after it the attempt is
	// stuck and may be taken over.
	LockedUntil time.Time
	CreatedAt   time.Time
	// ExpiresAt is when the stored result may be forgotten.
	ExpiresAt time.Time
	Charge    *Charge  // set when SUCCEEDED
	Failure   *Failure // set when FAILED
	// ActionURL is the provider's challenge page while the attempt waits for
	// the shopper to authenticate (ActionSince: since when; ActionCheckedAt:
	// when the provider was last read about it). Empty for an attempt that
	// never waited. Nothing is sent for an attempt that waited, ever: its
	// outcome is read from the provider (settle, checkAction).
	ActionURL       string
	ActionSince     time.Time
	ActionCheckedAt time.Time
	// RefundOf is the charge a refund attempt refunds (Input holds its
	// amount, resolved at the claim, its currency and, as Description, its
	// reason); Refund is set when it SUCCEEDED. PendingSince is when the
	// provider accepted the refund without making it final, or when the
	// redrive window ended without the provider showing it: from then on
	// it is only ever read.
	RefundOf uuid.UUID
	// RefundOfProvider is the provider's id of that charge, when the
	// attempt was read with it (refundRequest reads it otherwise).
	RefundOfProvider string
	Refund           *Refund
	PendingSince     time.Time
	// LateChargeID is the charge found at the provider after a charge
	// attempt failed as provider_unavailable, and refunded (late.go).
	LateChargeID uuid.UUID
}

// waiting reports whether a is PROCESSING and waits for the shopper.
func (a Attempt) waiting() bool { return a.Status == StatusProcessing && a.ActionURL != "" }

// providerKeyPrefix starts every provider key, so that a charge at the
// provider can be traced to chargeonce.
const providerKeyPrefix = "chargeonce_"

// newAttempt is the attempt a request claims for key and in at now: held by
// the request for lease, its result kept for retention. It is the one place
// where an attempt's id and provider key are made.
func newAttempt(m Merchant, key string, in ChargeInput, now time.Time, lease, retention time.Duration) Attempt {
	id := newID()
	return Attempt{
		ID:             id,
		Kind:           KindCharge,
		MerchantID:     m.ID,
		IdempotencyKey: key,
		Input:          in,
		Fingerprint:    Fingerprint(in),
		Status:         StatusProcessing,
		ProviderKey:    providerKeyPrefix + id.String(),
		Number:         1,
		LockedUntil:    now.Add(lease),
		CreatedAt:      now,
		ExpiresAt:      now.Add(retention),
	}
}

// newID is the id of a new attempt, charge or event: a UUIDv7, whose
// leading bits are the time, so that each insert lands at the right edge of
// its table's primary key index, in a page that is already in memory,
// instead of in a random page of an index that grows with every stored key
// (the cost bench's growth runs measure).
func newID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// stuck reports whether a is PROCESSING with nobody holding it at now: its
// lease has ended, or was released.
func (a Attempt) stuck(now time.Time) bool {
	return a.Status == StatusProcessing && a.LockedUntil.Before(now)
}

// nextProviderKey is the key that replaces a's spent provider key. Like the
// first, it is derived from the attempt id, so that every charge at the
// provider traces to its attempt: chargeonce_<id>, then chargeonce_<id>_2,
// chargeonce_<id>_3, and so on.
func nextProviderKey(a Attempt) string {
	base := providerKeyPrefix + a.ID.String()
	n := 1
	if suffix, ok := strings.CutPrefix(a.ProviderKey, base+"_"); ok {
		if i, err := strconv.Atoi(suffix); err == nil && i > 1 {
			n = i
		}
	}
	return fmt.Sprintf("%s_%d", base, n+1)
}
