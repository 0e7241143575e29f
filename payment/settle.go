package payment

import (
	"context"
	"errors"
	"log/slog"

	"chargeonce/metrics"
)

// settlement is how settle left an attempt.
type settlement struct {
	done   Attempt // the stored attempt, when finalized
	final  bool    // finalized by this holder
	fenced bool    // finalized by another holder first
}

// settle drives an attempt that this holder has just taken over (the
// reconciler, or a retry) to a final status: it asks the provider by our
// provider key and records what the provider knows; an attempt the provider
// never saw is sent again under the same key (the provider deduplicates)
// until RedriveWindow after its claim, and fails as provider_unavailable
// after that. When the outcome stays unknown, the attempt stays PROCESSING
// and its lease is given back for the next pass.
//
// A provider key is replaced only when the provider says it is spent (see
// ErrProviderKeySpent): it replays a failure for the key, so that no send
// under it can ever charge, and it holds no charge for the attempt. The new
// key is recorded on the attempt, fenced on the holder's attempt number,
// before anything is sent under it; so a key is never replaced while the
// provider may hold a charge under it, and whoever holds the attempt next
// asks about, and sends under, the new key.
func (s *Service) settle(ctx context.Context, log *slog.Logger, m Merchant, a Attempt, by string) settlement {
	pc, err := s.provider.FindCharge(ctx, providerRequest(m, a))
	if err != nil {
		s.leaveOpen(ctx, log, a, "the provider lookup failed", err)
		return settlement{}
	}
	reason := "the provider has the charge"
	switch {
	case pc != nil:
	case s.cfg.Now().Sub(a.CreatedAt) >= s.cfg.RedriveWindow:
		reason = "the provider never saw the charge and the redrive window has passed"
		if by == metrics.ByReconciler {
			s.metrics.ReconcilerGiveUps.Inc()
		}
		pc = &ProviderCharge{FailureCode: "provider_unavailable",
			FailureMessage: "The card provider could not be reached; the card was not charged."}
	default:
		reason = "the provider never saw the charge; sent it again under the same provider key"
		if by == metrics.ByReconciler {
			s.metrics.ReconcilerRedrives.Inc()
		}
		got, err := s.provider.CreateCharge(ctx, providerRequest(m, a))
		if errors.Is(err, ErrProviderKeySpent) {
			rekeyed, rerr := s.rekey(ctx, log, a)
			if errors.Is(rerr, errFenced) {
				log.InfoContext(ctx, "attempt was taken over or finalized by another holder; not sent under a new key")
				return settlement{fenced: true}
			}
			if rerr != nil {
				s.leaveOpen(ctx, log, a, "the provider key is spent and a new one could not be recorded", rerr)
				return settlement{}
			}
			a = rekeyed
			reason = "the provider key was spent and the provider held no charge; sent under a new provider key"
			got, err = s.provider.CreateCharge(ctx, providerRequest(m, a))
		}
		if err != nil {
			s.leaveOpen(ctx, log, a, "re-sent the charge, outcome still unknown", err)
			return settlement{}
		}
		pc = &got
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalizeTimeout)
	defer cancel()
	done, err := s.finalize(writeCtx, a, *pc, by)
	if errors.Is(err, errFenced) {
		log.InfoContext(ctx, "attempt was finalized by another holder; nothing to do")
		return settlement{fenced: true}
	}
	if err != nil {
		s.leaveOpen(ctx, log, a, "could not record the provider's answer", err)
		return settlement{}
	}
	msg := "reconcile: attempt finalized"
	if by == metrics.ByRequest {
		msg = "retry takeover: attempt finalized"
	}
	log.InfoContext(ctx, msg, "status", done.Status, "reason", reason,
		"provider_charge_id", pc.ID, "failure_code", pc.FailureCode)
	return settlement{done: done, final: true}
}

// rekey records the next provider key on a, fenced on its attempt number
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

// leaveOpen logs why the attempt stays PROCESSING and gives its lease back,
// so that the next pass or retry takes it at once rather than when the
// lease ends.
func (s *Service) leaveOpen(ctx context.Context, log *slog.Logger, a Attempt, reason string, err error) {
	log.WarnContext(ctx, "attempt stays PROCESSING", "reason", reason, "err", err)
	s.giveBack(ctx, log, a, giveBackBudget)
}

// resume settles an attempt a retry has taken over and answers the retry.
func (s *Service) resume(ctx context.Context, log *slog.Logger, m Merchant, a Attempt) Result {
	st := s.settle(ctx, log, m, a, metrics.ByRequest)
	switch {
	case st.final:
		return s.result(st.done, false)
	case st.fenced:
		if stored, err := s.store.get(ctx, m.ID, a.IdempotencyKey); err == nil {
			return s.result(stored, true)
		}
	}
	// Left open, its lease released: the reconciler's next pass, or the next retry.
	s.metrics.OutcomeUnknown.Inc()
	a.LockedUntil = s.cfg.Now()
	return s.result(a, false)
}
