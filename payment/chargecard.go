package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
)

// The charge kind's entry points: the claim of a key for a charge, and the
// status of a charge attempt.

// ChargeCard charges the card described by in, once per key: the first
// request with a key claims it and calls the provider; every later one gets
// the stored result (replayed), PROCESSING while the attempt is open, or
// EKEYREUSED when its input differs from the first's. A second payment of an
// order under another key is EORDERPAID. A retry that finds the attempt
// stuck (its holder died, left the outcome unknown, or never learned that
// its claim committed) takes it over and settles it at once. While the
// database cannot be reached the answer is EUNAVAILABLE, and nothing is
// charged. The key is among the merchant's own (ChargeCheckoutSession
// charges among a session's); one beginning with chargeonce_ is refused,
// reserved for chargeonce's own operations.
func (s *Service) ChargeCard(ctx context.Context, m Merchant, key string, in ChargeInput) (Result, error) {
	if err := validateCallerKey(key); err != nil {
		return Result{}, err
	}
	return s.charge(ctx, m, uuid.Nil, key, in)
}

// charge is ChargeCard with key among the keys of keySession (uuid.Nil:
// the merchant's own).
func (s *Service) charge(ctx context.Context, m Merchant, keySession uuid.UUID, key string, in ChargeInput) (_ Result, err error) {
	// Every error is answered before the provider is called: say so.
	defer func() {
		if err == nil {
			return
		}
		s.noteRefusal(ctx, m, KindCharge, key, err)
		var e *Error
		if errors.As(err, &e) && e.Code == EUNAVAILABLE {
			unavailable := *e
			unavailable.Message = "the payment database is unavailable; nothing was charged. Retry the same request with the same idempotency key after retryAfterMs"
			err = &unavailable
		}
	}()
	if err := ValidateKey(key); err != nil {
		return Result{}, err
	}
	if err := s.httpsInProduction("input.returnUrl", in.ReturnURL); err != nil {
		return Result{}, err
	}
	if err := in.Validate(); err != nil {
		return Result{}, err
	}
	if a, ok := s.finished.get(m.ID, keySession, key, s.cfg.Now()); ok {
		// A replay of a finished attempt: nothing to ask the database.
		return s.answerRetry(ctx, m, a, Fingerprint(in), func() Terms { return ChargeTerms{Input: in} })
	}
	// The database's share of the request, claim and reads included.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	// Twice at most: a key whose expired result is deleted between our claim
	// and our read is free again, and the second claim takes it.
	for range 2 {
		a := newChargeAttempt(m, key, in, s.cfg.Now(), s.cfg.Lease, s.cfg.Retention)
		a.KeySession = keySession
		c, err := traceClaim(ctx, a, func(ctx context.Context) (claim, error) { return s.store.claim(ctx, a, s.cfg.SessionMaxAttempts) })
		if err != nil {
			switch code := ErrorCode(err); {
			case code == EORDERPAID && in.CheckoutSessionID != uuid.Nil:
				// A live attempt holds the order, or the session (whose
				// index a unique violation may name either way).
				return Result{}, s.sessionPaidOrOrder(ctx, in.CheckoutSessionID, err)
			case code == EUNAVAILABLE && db.MayHaveRun(err):
				// The database may have committed the claim and lost only the
				// reply: then its lease is this request's, which is about to
				// answer an error. Releasing it lets the client's retry take
				// the attempt over at once; the release is fenced on the
				// claim's id and first fence, so it changes nothing
				// if the claim never happened.
				s.release(ctx, s.attemptLog(m, a), a, lostClaimReleaseBudget, "the answer to its claim was lost")
			case code == ESESSIONPAID:
				s.metrics.SessionRefused.WithLabelValues("paid").Inc()
			case code == EORDERPAID:
				// Another key holds a live attempt for this order (the unique
				// index refused ours); counted like an order already paid.
				s.metrics.OrderPaid.Inc()
			}
			return Result{}, err
		}
		switch c.outcome {
		case claimedByUs:
			s.cfg.Fault(FaultAfterClaim)
			// From here on the attempt is ours and must reach the provider and
			// the database whatever the client does: a client that hangs up
			// must not leave a charge unrecorded.
			return s.perform(context.WithoutCancel(ctx), m, c.attempt), nil
		case foundStored:
			// The common retry: the claim's statement read the stored attempt.
			return s.answerRetry(ctx, m, c.attempt, a.Fingerprint, a.terms)
		}
		stored, err := s.store.get(ctx, m.ID, keySession, key)
		if err == nil {
			return s.answerRetry(ctx, m, stored, a.Fingerprint, a.terms)
		}
		if !errors.Is(err, errNotFound) {
			return Result{}, err
		}
		// Not claimed and not stored: the session takes no attempt, the order
		// is paid, or the key was just freed.
		if in.CheckoutSessionID != uuid.Nil {
			if err := s.sessionRefusal(ctx, m, in.CheckoutSessionID); err != nil {
				return Result{}, err
			}
		}
		if in.OrderID != "" {
			paid, err := s.store.orderIsPaid(ctx, m.ID, in.OrderID)
			if err != nil {
				return Result{}, err
			}
			if paid {
				s.metrics.OrderPaid.Inc()
				return Result{}, errOrderPaid
			}
		}
	}
	return Result{}, fmt.Errorf("claim of key %q neither succeeded nor found a stored attempt", key)
}

// ChargeStatus returns the state of the attempt made with key, or nil when
// this merchant never used the key: the merchant's server's query. Its own
// keys come first; a key it never used is looked for among its checkout
// pages' keys (the newest attempt under it), so that its server reads what
// a page paid by the key the page sent.
func (s *Service) ChargeStatus(ctx context.Context, m Merchant, key string) (*Result, error) {
	a, ok, err := s.attempt(ctx, m, uuid.Nil, key)
	if err == nil && !ok {
		a, ok, err = s.pageAttempt(ctx, m, key)
	}
	if err != nil || !ok || a.Kind != KindCharge {
		return nil, err
	}
	return s.status(ctx, m, a), nil
}

// pageAttempt is the newest attempt a checkout page of m made under key;
// ok is false when there is none.
func (s *Service) pageAttempt(ctx context.Context, m Merchant, key string) (Attempt, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	a, err := s.store.getPage(ctx, m.ID, key)
	if errors.Is(err, errNotFound) {
		return Attempt{}, false, nil
	}
	return a, err == nil, err
}

// ChargeStatusAmong is ChargeStatus among the keys of keySession (uuid.Nil:
// the merchant's own), for a reader that has checked the session already:
// the live status of a page's attempt (SessionOf names its session).
func (s *Service) ChargeStatusAmong(ctx context.Context, m Merchant, keySession uuid.UUID, key string) (*Result, error) {
	a, ok, err := s.attempt(ctx, m, keySession, key)
	if err != nil || !ok || a.Kind != KindCharge {
		return nil, err
	}
	return s.status(ctx, m, a), nil
}

// newChargeAttempt is the charge attempt a request claims for key and in
// at now.
func newChargeAttempt(m Merchant, key string, in ChargeInput, now time.Time, lease, retention time.Duration) Attempt {
	return newAttempt(m, key, ChargeTerms{Input: in}, Fingerprint(in), now, lease, retention)
}
