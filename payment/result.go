package payment

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// fresh is the answer of the holder that just worked on a: no replay.
func (s *Service) fresh(a Attempt) Result { return s.result(a) }

// replay is a's stored state as an answer to a later request: a finished
// attempt's result with replayed set, or PROCESSING while another holder
// works on it.
func (s *Service) replay(a Attempt) Result {
	r := s.result(a)
	r.Replayed = a.Status != StatusProcessing
	return r
}

// stored answers a retry with the stored attempt a, counted as a replay or
// as an answer while another holder works.
func (s *Service) stored(a Attempt) Result {
	if a.Status == StatusProcessing {
		s.metrics.InFlight.Inc()
	} else {
		s.metrics.Replays.Inc()
	}
	return s.replay(a)
}

// result is a's state as an answer.
func (s *Service) result(a Attempt) Result {
	r := Result{IdempotencyKey: a.IdempotencyKey, Status: a.Status, ExpiresAt: a.ExpiresAt}
	switch a.Status {
	case StatusSucceeded:
		s.op(a).answer(a, &r)
	case StatusFailed:
		r.Failure = a.Failure
	default:
		r.RetryAfter = s.retryAfter(a.LockedUntil)
		if !a.PendingSince.IsZero() {
			// The provider holds it pending: nothing changes before
			// the reconciler's next read, at locked_until.
			r.RetryAfter = max(a.LockedUntil.Sub(s.cfg.Now()), minRetryAfter)
		}
		if a.Wait.URL != "" {
			// Between the reconciler's looks, locked_until is the next one; a
			// poll reads the provider itself (checkAction), so come back soon.
			r.RetryAfter = max(s.cfg.AuthenticationRecheck, minRetryAfter)
			r.NextAction = s.nextAction(a)
		}
	}
	return r
}

// minRetryAfter keeps clients from polling in a tight loop.
const minRetryAfter = 100 * time.Millisecond

// retryAfter says when a PROCESSING attempt is worth asking about again:
// soon while its holder works on it, and at the next reconcile once the
// lease has ended.
func (s *Service) retryAfter(lockedUntil time.Time) time.Duration {
	d := s.cfg.ReconcileInterval
	if left := lockedUntil.Sub(s.cfg.Now()); left > 0 {
		d = min(s.cfg.PollInterval, left)
	}
	return max(d, minRetryAfter)
}

// status answers a status query about a: a replay, but for an attempt that
// waits for the shopper, whose provider is read first (checkAction), so
// that a page polling after the return learns the outcome at once.
func (s *Service) status(ctx context.Context, m Merchant, a Attempt) *Result {
	if a.waiting() {
		a = s.checkAction(ctx, m, a)
	}
	r := s.replay(a)
	return &r
}

// statusOf is m's attempt of kind under key (among its own keys) and its
// state, or nil for a key never used for that kind.
func (s *Service) statusOf(ctx context.Context, m Merchant, key string, kind Kind) (Attempt, *Result, error) {
	a, ok, err := s.attempt(ctx, m, uuid.Nil, key)
	if err != nil || !ok || a.Kind != kind {
		return Attempt{}, nil, err
	}
	r := s.replay(a)
	return a, &r, nil
}

// attempt is m's attempt under key among the keys of keySession (uuid.Nil:
// the merchant's own), from memory when it is finished there; ok is false
// for a key never used there.
func (s *Service) attempt(ctx context.Context, m Merchant, keySession uuid.UUID, key string) (a Attempt, ok bool, err error) {
	if err := ValidateKey(key); err != nil {
		return Attempt{}, false, err
	}
	if a, ok := s.finished.get(m.ID, keySession, key, s.cfg.Now()); ok {
		return a, true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	a, err = s.store.get(ctx, m.ID, keySession, key)
	if errors.Is(err, errNotFound) {
		return Attempt{}, false, nil
	}
	if err != nil {
		return Attempt{}, false, err
	}
	s.finished.put(a)
	return a, true, nil
}
