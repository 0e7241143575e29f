package payment

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Attempt is one attempt: a merchant's claim of an idempotency key for an
// operation of one kind (a charge, a refund…), who holds it, and where it
// stands. The engine (claim, lease, perform, settle, reconcile, result)
// reads only what every kind has; what the attempt was claimed for, and
// what it made, is its kind's Terms. The store alone converts it to and
// from database rows.
type Attempt struct {
	ID             uuid.UUID
	Kind           Kind
	MerchantID     uuid.UUID
	IdempotencyKey string
	// KeySession is the checkout session whose keys IdempotencyKey is
	// among: a page's attempt, made on the session with a publishable key.
	// uuid.Nil for the merchant's own keys, which its server sends.
	KeySession uuid.UUID
	// Fingerprint identifies the request (see Fingerprint): the same key
	// with another request is refused.
	Fingerprint []byte
	Status      Status
	// ProviderKey is our idempotency key at the card provider, the same on
	// every send for the life of the attempt; it is replaced only when the
	// provider has spent it (see ErrProviderKeySpent and nextProviderKey).
	ProviderKey string
	// Fence counts the attempt's holders: 1 for the request that claimed
	// it, one more for each takeover. Finalizing writes are fenced on it,
	// so a holder that lost the attempt writes nothing.
	Fence int32
	// LockedUntil is when the holder's lease ends; after it the attempt is
	// stuck and may be taken over.
	LockedUntil time.Time
	CreatedAt   time.Time
	// ExpiresAt is when the stored result may be forgotten.
	ExpiresAt time.Time
	// Terms are what the attempt was claimed for and, once it SUCCEEDED,
	// what it made: ChargeTerms, RefundTerms, … as its Kind says.
	Terms   Terms
	Failure *Failure // set when FAILED

	// The feature states beside the terms.

	// Wait is the attempt's wait for the shopper to authenticate; zero for
	// an attempt that never waited. Nothing is sent for an attempt that
	// waited, ever: its outcome is read from the provider (settle,
	// checkAction).
	Wait ShopperWait
	// PendingSince is when the provider accepted the operation without
	// making it final, or when the redrive window ended without the
	// provider showing it: from then on it is only ever read.
	PendingSince time.Time
	// LateChargeID is the charge found at the provider after a charge
	// attempt failed as provider_unavailable, and given back (late.go).
	LateChargeID uuid.UUID
}

// Terms are what an attempt of one kind was claimed for, and what it made.
type Terms interface {
	// Kind is the kind of attempt the terms are of.
	Kind() Kind
}

// ShopperWait is an attempt's wait for the shopper: URL is the provider's
// challenge page, Since when it began waiting, CheckedAt when the provider
// was last read about it.
type ShopperWait struct {
	URL       string
	Since     time.Time
	CheckedAt time.Time
}

// terms is what a was asked for: a retry's answer reads it only when
// the retry asks for something else (answerRetry).
func (a Attempt) terms() Terms { return a.Terms }

// waiting reports whether a is PROCESSING and waits for the shopper.
func (a Attempt) waiting() bool { return a.Status == StatusProcessing && a.Wait.URL != "" }

// providerKeyPrefix starts every provider key, so that a charge at the
// provider can be traced to chargeonce.
const providerKeyPrefix = "chargeonce_"

// firstProviderKey is the provider key an attempt is first sent under,
// chargeonce_<id>: its id gives it, so its row keeps NULL for it (00038).
func firstProviderKey(id uuid.UUID) string { return providerKeyPrefix + id.String() }

// newAttempt is the attempt a request claims for key at now, for terms t
// identified by fingerprint: held by the request for lease, its result
// kept for retention. It is the one place where an attempt's id and
// provider key are made.
func newAttempt(m Merchant, key string, t Terms, fingerprint []byte, now time.Time, lease, retention time.Duration) Attempt {
	id := newID()
	// PostgreSQL keeps microseconds: the claim's time as its row says.
	now = now.Truncate(time.Microsecond)
	return Attempt{
		ID:             id,
		Kind:           t.Kind(),
		MerchantID:     m.ID,
		IdempotencyKey: key,
		Terms:          t,
		Fingerprint:    fingerprint,
		Status:         StatusProcessing,
		ProviderKey:    firstProviderKey(id),
		Fence:          1,
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

// idFloor is the least id newID can make at t or later: t's milliseconds,
// then zeros. Every id below it was made before t.
func idFloor(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id
}

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
	base := firstProviderKey(a.ID)
	n := 1
	if suffix, ok := strings.CutPrefix(a.ProviderKey, base+"_"); ok {
		if i, err := strconv.Atoi(suffix); err == nil && i > 1 {
			n = i
		}
	}
	return fmt.Sprintf("%s_%d", base, n+1)
}
