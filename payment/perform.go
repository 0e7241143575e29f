package payment

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/attribute"
	"time"

	goretry "github.com/sethvargo/go-retry"

	"chargeonce/history"
)

// finalizeTimeout bounds the write of a provider's answer.
const finalizeTimeout = 10 * time.Second

// perform calls the provider for a freshly claimed attempt, of any kind,
// and records the outcome.
func (s *Service) perform(ctx context.Context, m Merchant, a Attempt) Result {
	log := s.attemptLog(m, a)
	// Finish the provider phase well within the lease, so that the reconciler
	// never takes over an attempt whose holder is still working.
	providerCtx, cancel := context.WithTimeout(ctx, s.cfg.Lease/2)
	sent := s.cfg.Now()
	o, err := s.callProvider(providerCtx, m, a)
	cancel()
	if err != nil {
		// Nobody knows yet whether the card was charged. Hand the attempt to
		// the reconciler (or the client's retry) now, not when the lease ends.
		a = s.release(ctx, log, a, releaseBudget, "the provider's outcome is unknown",
			s.note(ctx, a, history.ProviderLost, lostDetail(err, s.cfg.Now().Sub(sent))))
		log.WarnContext(ctx, "provider outcome unknown; attempt stays PROCESSING for the reconciler", "err", err)
		s.metrics.OutcomeUnknown.Inc()
		return s.fresh(a)
	}
	s.cfg.Fault(FaultAfterProvider)
	// What the provider answered, when: noted only where the write that
	// follows does not say it (a fresh charge's finalization does).
	answeredAt := s.cfg.Now()
	answered := func() history.Entry {
		return noteOf(ctx, s.cfg.History, a, history.ProviderAnswered, outcomeDetail(o, answeredAt.Sub(sent)), answeredAt)
	}
	switch o.State {
	case outcomeWaiting:
		// The shopper must authenticate first: nothing more to send, ever.
		return s.fresh(s.await(ctx, log, a, o, answered()))
	case outcomePending:
		// The provider holds the operation and will make it final later: it
		// is read from now on, never sent again.
		return s.fresh(s.pend(ctx, a, answered()))
	}
	// The provider has answered, and losing that answer now would leave the
	// attempt to the reconciler for the rest of the lease. A write that fails
	// for a passing reason (a database restart or failover) is retried while
	// the lease holds, and for finalizeTimeout at least; that is safe, as the
	// write is fenced on the attempt and a provider charge is recorded once.
	writeCtx, cancel := context.WithTimeout(ctx, max(a.LockedUntil.Sub(s.cfg.Now()), finalizeTimeout))
	defer cancel()
	var done Attempt
	err = goretry.Do(writeCtx, goretry.WithCappedDuration(time.Second, goretry.NewExponential(50*time.Millisecond)),
		func(ctx context.Context) error {
			done, err = s.finalize(ctx, a, o, byRequest)
			if code := ErrorCode(err); err != nil && !errors.Is(err, errFenced) && (code == EUNAVAILABLE || code == EINTERNAL) {
				log.WarnContext(ctx, "could not record the provider's answer yet; retrying", "err", err)
				return goretry.RetryableError(err)
			}
			return err
		})
	switch {
	case errors.Is(err, errFenced):
		done, err = s.store.getByID(writeCtx, a.ID)
		if err == nil && s.recordedBy(done, a, o) {
			// A recording of ours committed, and only its reply was lost:
			// this request made the operation.
			log.InfoContext(ctx, "the provider's answer was recorded by an earlier try of this request", "provider_id", o.ProviderID)
			return s.fresh(done)
		}
		// Someone else finalized the attempt first; theirs is the stored answer.
		log.InfoContext(ctx, "attempt was finalized by another holder; answering with the stored result")
		if err == nil {
			return s.replay(done)
		}
		fallthrough
	case err != nil:
		s.cfg.History.Add(answered())
		// The provider answered but the answer is not stored. The attempt stays
		// PROCESSING; the reconciler asks the provider by our key when the lease ends.
		log.ErrorContext(ctx, "could not record the provider's answer; attempt stays PROCESSING",
			"provider_id", o.ProviderID, "succeeded", o.succeeded(), "err", err)
		return s.fresh(a)
	}
	s.cfg.Fault(FaultAfterFinalize)
	log.InfoContext(ctx, "attempt finalized", "status", done.Status, "provider_id", o.ProviderID)
	return s.fresh(done)
}

// recordedBy reports whether stored is held attempt a as finalized with
// the provider's success o: still under a's fence (nobody took it over),
// with what o made.
func (s *Service) recordedBy(stored, a Attempt, o outcome) bool {
	return o.succeeded() && stored.Fence == a.Fence && stored.Status == StatusSucceeded &&
		s.op(stored).providerID(stored) == o.ProviderID
}

// callProvider sends a's operation under our provider key. An unknown
// outcome is retried a few times within the retry budget; that is safe
// because the provider deduplicates on the key.
func (s *Service) callProvider(ctx context.Context, m Merchant, a Attempt) (outcome, error) {
	backoff := goretry.WithMaxDuration(s.cfg.ProviderRetryBudget,
		goretry.WithMaxRetries(s.cfg.ProviderRetries, goretry.NewExponential(200*time.Millisecond)))
	var o outcome
	err := goretry.Do(ctx, backoff, func(ctx context.Context) error {
		var err error
		o, err = s.op(a).send(ctx, m, a)
		if errors.Is(err, ErrOutcomeUnknown) {
			return goretry.RetryableError(err)
		}
		return err
	})
	return o, err
}

// finalize records the provider's definitive answer o on a, fenced on a's
// fence, for its holder by, as a's kind records it, and counts it. notes
// (how the holder learned o) and the finalization ride in the write as its
// history row; without notes, the request that claimed a recorded what the
// provider answered it, which a's row says all of, and nothing more is
// written (history.List reads it). When nothing is written, the notes go
// to the recorder, with the refusal when the write was fenced.
func (s *Service) finalize(ctx context.Context, a Attempt, o outcome, by holder, notes ...history.Entry) (_ Attempt, err error) {
	ctx, span := startSpan(ctx, "payment.finalize", a)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("chargeonce.holder", holderName(by)), attribute.String("chargeonce.status", string(finalStatus(o))))
	}
	defer func() { endSpan(span, err) }()
	now := s.cfg.Now()
	op := s.op(a)
	expires := now.Add(s.cfg.Retention)
	rctx, ride := ctx, &riding{}
	if len(notes) > 0 {
		final := s.note(ctx, a, history.Finalized, fmt.Sprintf("by %s; its result is kept until %s", holderName(by), expires.UTC().Format(time.RFC3339)))
		final.At, final.Status = now, string(finalStatus(o)) // the record's time, as its event's
		rctx, ride = withRiding(ctx, append(notes, final)...)
	}
	done, err := op.record(rctx, a, o, now, expires)
	switch {
	case err == nil && len(ride.entries) > 0 && !ride.written:
		s.cfg.History.Add(ride.entries...) // a kind whose write carries no rows
	case errors.Is(err, errFenced):
		s.cfg.History.Add(append(notes, s.note(ctx, a, history.FenceRefused,
			fmt.Sprintf("holder %d's write of %s refused: another holder finalized or took it over", a.Fence, finalStatus(o))))...)
	case err != nil:
		s.cfg.History.Add(notes...)
	}
	if err == nil {
		op.observe(a, o, by, now)
	}
	return done, err
}

// lostDetail says how a provider call that took took ended without an
// answer: a timeout, or the connection lost.
func lostDetail(err error, took time.Duration) string {
	why := "no answer"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		why = "timed out"
	case errors.Is(err, ErrOutcomeUnknown):
		why = "the connection ended without an answer"
	}
	return fmt.Sprintf("%s after %d ms", why, took.Milliseconds())
}

// pend records that the provider holds a's operation without having made
// it final: nothing is sent for it again, and the reconciler reads it at
// its next look, RefundCheckInterval from now. When the write fails, the
// attempt stays held until its lease ends, and the reconciler reads it then.
func (s *Service) pend(ctx context.Context, a Attempt, notes ...history.Entry) Attempt {
	s.cfg.History.Add(append(notes, s.note(ctx, a, history.Pending, "the provider holds it pending; read again from now on"))...)
	now := s.cfg.Now()
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalizeTimeout)
	defer cancel()
	pending, err := s.store.pend(writeCtx, a, now, now.Add(s.cfg.RefundCheckInterval))
	if err != nil {
		if a.PendingSince.IsZero() {
			a.PendingSince = now
		}
		return a
	}
	return pending
}
