package payment

import (
	"context"

	"chargeonce/history"
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

// answerRetry answers a request whose key is already claimed by a, which
// asked for what asked returns (its fingerprint: fingerprint), read only
// when it differs from a's. The history counts it
// (a replay, a PROCESSING answer) or notes it (a mismatch); a takeover
// notes itself.
func (s *Service) answerRetry(ctx context.Context, m Merchant, a Attempt, fingerprint []byte, asked func() Terms) (Result, error) {
	s.finished.put(a)
	if !sameRequest(a.Fingerprint, fingerprint) {
		s.cfg.History.Add(s.note(ctx, a, history.Mismatch, EKEYREUSED+": refused, "+mismatch(a.Terms, asked())))
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
	r := s.stored(a)
	typ := history.Replayed
	if r.Status == StatusProcessing {
		typ = history.Processing
	} else if s.op(a).settled(a) {
		r.Replay = &Replay{attempt: a}
	}
	s.cfg.History.Count(s.note(ctx, a, typ, ""))
	return r, nil
}
