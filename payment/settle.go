package payment

import (
	"context"
	"errors"
	"log/slog"

	"chargeonce/history"
)

// settlement is how settle left an attempt.
type settlement int

const (
	// leftOpen: the outcome is still unknown; the attempt stays PROCESSING
	// and its lease is released, for the next pass or retry.
	leftOpen settlement = iota + 1
	// finalized: this holder recorded the provider's answer.
	finalized
	// finalizedByAnother: someone else finalized the attempt, or took it
	// over, first; theirs is the stored answer.
	finalizedByAnother
	// waitingForShopper: the provider waits for the shopper to
	// authenticate; the attempt stays PROCESSING with its next action, for
	// the reconciler's next look (authentication.go).
	waitingForShopper
	// waitingForProvider: the provider holds the operation pending; the
	// attempt stays PROCESSING, for the reconciler's next read.
	waitingForProvider
)

// settle drives an attempt that the holder by has just taken over (the
// reconciler, or a retry) to a final status: it asks the provider by our
// provider key and records what the provider knows; an attempt the provider
// never saw is sent again under the same key (the provider deduplicates)
// until RedriveWindow after its claim, and fails as provider_unavailable
// after that. When the outcome stays unknown, the attempt stays PROCESSING
// and its lease is released for the next pass. It returns the attempt as it
// left it: finalized, or left open with its lease ended.
//
// A provider key is replaced only when the provider says it is spent (see
// ErrProviderKeySpent): it replays a failure for the key, so that no send
// under it can ever charge, and it holds no charge for the attempt. The new
// key is recorded on the attempt, fenced on the holder's fence,
// before anything is sent under it; so a key is never replaced while the
// provider may hold a charge under it, and whoever holds the attempt next
// asks about, and sends under, the new key.
//
// What it learns from the provider on the way is noted in the history, in
// the write that ends its work on a (the finalization, the wait, the
// release).
func (s *Service) settle(ctx context.Context, log *slog.Logger, m Merchant, a Attempt, by holder) (settlement, Attempt) {
	var notes []history.Entry
	open := func(reason string, err error) (settlement, Attempt) {
		log.WarnContext(ctx, "attempt stays PROCESSING", "reason", reason, "err", err)
		return leftOpen, s.release(ctx, log, a, releaseBudget, reason, notes...)
	}
	op := s.op(a)
	o, err := op.read(ctx, m, a)
	if err != nil {
		return open("the provider lookup failed", err)
	}
	read := "the provider holds nothing under provider key " + a.ProviderKey
	if o != nil {
		read = outcomeDetail(*o, 0)
	}
	notes = append(notes, s.note(ctx, a, history.ProviderRead, read))
	reason := "the provider has the " + string(a.Kind)
	age := s.cfg.Now().Sub(a.CreatedAt)
	switch {
	case o != nil && o.State == outcomePending:
		return waitingForProvider, s.pend(ctx, a, notes...)
	case o != nil && o.State == outcomeWaiting:
		if !s.abandoned(a) {
			if a.Wait.Since.IsZero() {
				return waitingForShopper, s.await(ctx, log, a, *o, notes...)
			}
			// A look at an attempt that still waits: the routine, not news.
			return waitingForShopper, s.await(ctx, log, a, *o)
		}
		// Only a cancel the provider confirms ends the attempt FAILED: one it
		// refuses because the shopper completed meanwhile is that outcome.
		reason = "nobody authenticated within the authentication window; cancelled the payment at the provider"
		ab, ok := op.(abandoner)
		if !ok {
			return open("the provider has the "+string(a.Kind)+" waiting for the shopper, and it cannot be cancelled", nil)
		}
		got, err := ab.abandon(ctx, m, a, *o)
		if err == nil && got.State == outcomeWaiting {
			err = errors.New("the provider still has the payment waiting after the cancel")
		}
		if err != nil {
			return open("could not cancel the payment abandoned mid-authentication", err)
		}
		notes = append(notes, s.note(ctx, a, history.Abandoned, "nobody authenticated within the window; the payment was cancelled at the provider"))
		o = &got
	case o != nil:
	case a.Wait.URL != "":
		// It waited for the shopper: it is never sent again, whatever the
		// provider says now. Ask again at the next pass.
		return open("the provider does not find the payment that waited for authentication", nil)
	case age >= s.cfg.RedriveWindow:
		fail, message := op.unseen(a, age)
		if !fail {
			// Not given up on while a send may still land at the provider:
			// it is only read from now on, as a pending one is.
			return waitingForProvider, s.pend(ctx, a, notes...)
		}
		reason = "the provider never saw the " + string(a.Kind) + " and the redrive window has passed"
		if by == byReconciler {
			s.metrics.ReconcilerGiveUps.Inc()
		}
		failed := failedOutcome(FailureProviderUnavailable, message)
		o = &failed
	default:
		reason = "the provider never saw the " + string(a.Kind) + "; sent it again under the same provider key"
		if by == byReconciler {
			s.metrics.ReconcilerRedrives.Inc()
		}
		notes = append(notes, s.note(ctx, a, history.ProviderSent, sentDetail(a)+", sent again"))
		sent := s.cfg.Now()
		got, err := op.send(ctx, m, a)
		if errors.Is(err, ErrProviderKeySpent) {
			rekeyed, rerr := s.rekey(ctx, log, a)
			if errors.Is(rerr, errFenced) {
				log.InfoContext(ctx, "attempt was taken over or finalized by another holder; not sent under a new key")
				return finalizedByAnother, a
			}
			if rerr != nil {
				return open("the provider key is spent and a new one could not be recorded", rerr)
			}
			a = rekeyed
			reason = "the provider key was spent and the provider held no charge; sent under a new provider key"
			notes = append(notes, s.note(ctx, a, history.ProviderSent, sentDetail(a)+", a new provider key"))
			sent = s.cfg.Now()
			got, err = op.send(ctx, m, a)
		}
		if err != nil {
			notes = append(notes, s.note(ctx, a, history.ProviderLost, lostDetail(err, s.cfg.Now().Sub(sent))))
			return open("re-sent the "+string(a.Kind)+", outcome still unknown", err)
		}
		notes = append(notes, s.note(ctx, a, history.ProviderAnswered, outcomeDetail(got, s.cfg.Now().Sub(sent))))
		switch got.State {
		case outcomeWaiting:
			return waitingForShopper, s.await(ctx, log, a, got, notes...)
		case outcomePending:
			return waitingForProvider, s.pend(ctx, a, notes...)
		}
		o = &got
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalizeTimeout)
	defer cancel()
	done, err := s.finalize(writeCtx, a, *o, by, notes...)
	if errors.Is(err, errFenced) {
		log.InfoContext(ctx, "attempt was finalized by another holder; nothing to do")
		return finalizedByAnother, a
	}
	if err != nil {
		return open("could not record the provider's answer", err)
	}
	log.InfoContext(ctx, by.takeover()+": attempt finalized", "status", done.Status, "reason", reason,
		"provider_id", o.ProviderID, "failure_code", o.Failure.Code)
	return finalized, done
}

// rekey records the next provider key on a, fenced on its fence
// and its current key, before anything is sent under it.
func (s *Service) rekey(ctx context.Context, log *slog.Logger, a Attempt) (Attempt, error) {
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalizeTimeout)
	defer cancel()
	next := nextProviderKey(a)
	rekeyed, err := s.store.rekey(writeCtx, a, next)
	if err == nil {
		s.metrics.ProviderRekeys.Inc()
		log.WarnContext(ctx, "the provider spent our provider key and holds no charge for the attempt; recorded a new provider key",
			"old_provider_key", a.ProviderKey, "provider_key", next)
	}
	return rekeyed, err
}

// resume settles an attempt a retry has taken over and answers the retry.
func (s *Service) resume(ctx context.Context, log *slog.Logger, m Merchant, a Attempt) Result {
	st, a := s.settle(ctx, log, m, a, byRequest)
	switch st {
	case finalized, waitingForShopper, waitingForProvider:
		return s.fresh(a)
	case finalizedByAnother:
		if stored, err := s.store.getByID(ctx, a.ID); err == nil {
			return s.replay(stored)
		}
	}
	// Left open, its lease released: the reconciler's next pass, or the next retry.
	s.metrics.OutcomeUnknown.Inc()
	return s.fresh(a)
}
