package payment

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"chargeonce/db"
)

// claimOutcome is what a claim of a key found.
type claimOutcome int

const (
	// claimedByUs: the insert took the key; the attempt is this request's.
	claimedByUs claimOutcome = iota + 1
	// foundStored: the key was taken, and the same statement read the
	// stored attempt.
	foundStored
	// notVisibleYet: the key was taken by a transaction that the
	// statement's snapshot did not see, or the order is paid under another
	// key; nothing was read.
	notVisibleYet
)

// claim is a claim's outcome and, unless notVisibleYet, the attempt.
type claim struct {
	outcome claimOutcome
	attempt Attempt
}

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
		return s.answerRetry(ctx, m, a, Fingerprint(in))
	}
	// The database's share of the request, claim and reads included.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	// Twice at most: a key whose expired result is deleted between our claim
	// and our read is free again, and the second claim takes it.
	for range 2 {
		a := newAttempt(m, key, in, s.cfg.Now(), s.cfg.Lease, s.cfg.Retention)
		a.KeySession = keySession
		c, err := s.store.claim(ctx, a, s.cfg.SessionMaxAttempts)
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
				// claim's id and first attempt number, so it changes nothing
				// if the claim never happened.
				s.release(ctx, s.attemptLog(m, a), a, lostClaimReleaseBudget)
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
			return s.answerRetry(ctx, m, c.attempt, a.Fingerprint)
		}
		stored, err := s.store.get(ctx, m.ID, keySession, key)
		if err == nil {
			return s.answerRetry(ctx, m, stored, a.Fingerprint)
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

// answerRetry answers a request whose key is already claimed by a.
func (s *Service) answerRetry(ctx context.Context, m Merchant, a Attempt, fingerprint []byte) (Result, error) {
	s.finished.put(a)
	if !bytes.Equal(a.Fingerprint, fingerprint) {
		s.metrics.KeyReused.Inc()
		return Result{}, &Error{Code: EKEYREUSED, Field: "idempotencyKey",
			Message: "this idempotency key was already used with a different request; nothing was charged. Use a new key for a new checkout attempt"}
	}
	if now := s.cfg.Now(); a.stuck(now) {
		// Nobody holds the attempt. Take it over rather than make the client
		// wait for the reconciler; of several retries, one wins the takeover.
		taken, ok, err := s.store.takeOver(ctx, a, now, now.Add(s.cfg.Lease))
		if err != nil {
			return Result{}, err
		}
		if ok {
			s.metrics.RetryTakeovers.Inc()
			log := s.attemptLog(m, taken)
			log.InfoContext(ctx, "retry took over a stuck attempt")
			return s.resume(context.WithoutCancel(ctx), log, m, taken), nil
		}
		// Another retry or the reconciler took it a moment ago: report theirs.
		if a, err = s.store.getByID(ctx, a.ID); err != nil {
			return Result{}, err
		}
	}
	if a.waiting() {
		// The shopper may be back from authenticating: read the provider
		// (never send) and answer what it says.
		if a = s.checkAction(context.WithoutCancel(ctx), m, a); a.Status != StatusProcessing {
			return s.fresh(a), nil
		}
	}
	return s.stored(a), nil
}
