package payment

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"chargeonce/history"
)

// Customer authentication (3-D Secure). A charge with a ReturnURL may get
// an answer that is neither success nor failure: the provider waits for
// the shopper to authenticate on its challenge page (ProviderCharge.Action).
// The attempt then stays PROCESSING with that next action, and from then
// on nothing is ever sent for it again (no retry, no redrive, no new key):
// how it ends is only ever read from the provider, by whoever asks first.
//
//	claim ─► CreateCharge ─► waits (await: ActionURL, ActionSince, charge.requires_action)
//	                           │  read by: a retry of the key or a poll (checkAction, at most
//	                           │  once per AuthenticationRecheck), the reconciler every
//	                           │  AuthenticationCheckInterval (settle), a provider's webhook
//	                           ▼
//	          SUCCEEDED or FAILED authentication_failed, as the provider says; or, once
//	          AuthenticationWindow has passed since it began waiting, the reconciler
//	          cancels it at the provider: a confirmed cancel is FAILED
//	          authentication_abandoned, a cancel refused because the shopper completed
//	          meanwhile is SUCCEEDED.
//
// A double return from the bank, a reload or the back button can only
// read again; the finalizing write is fenced on the fence and
// conditional on PROCESSING, so whichever reader records the outcome
// first records it once.

// await records that a waits for the shopper at pc's challenge page, ends
// the holder's lease (nobody works on an attempt while the shopper
// authenticates), and schedules the reconciler's next look. The first
// time, it writes charge.requires_action. When the write fails, the
// attempt stays held until its lease ends and the reconciler finds the
// waiting payment at the provider; the answer still carries the next
// action, which is the provider's truth either way.
func (s *Service) await(ctx context.Context, log *slog.Logger, a Attempt, o outcome, notes ...history.Entry) Attempt {
	now := s.cfg.Now()
	if a.Wait.Since.IsZero() {
		notes = append(notes, s.note(ctx, a, history.WaitStarted, "the shopper is sent to authenticate at the bank"))
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalizeTimeout)
	writeCtx, ride := withRiding(writeCtx, notes...)
	defer cancel()
	// The next look: after the check interval, or at the window's end if
	// that comes first, so that an abandoned payment is cancelled on time.
	next := now.Add(s.cfg.AuthenticationCheckInterval)
	if end := s.windowEnd(a); !a.Wait.Since.IsZero() && end.Before(next) {
		next = end
	}
	waiting, began, err := s.store.await(writeCtx, a, o.Action.URL, now, next, s.cfg.AuthenticationWindow)
	if !ride.written {
		s.cfg.History.Add(notes...)
	}
	if err != nil {
		if !errors.Is(err, errFenced) {
			log.WarnContext(ctx, "could not record that the attempt waits for authentication; the reconciler will find it at the provider", "err", err)
		}
		a.Wait.URL = o.Action.URL
		if a.Wait.Since.IsZero() {
			a.Wait.Since = now
		}
		return a
	}
	if began {
		s.metrics.AuthenticationStarted.Inc()
		log.InfoContext(ctx, "attempt waits for the shopper to authenticate", "provider_id", o.ProviderID)
	}
	return waiting
}

// abandoned reports whether a has waited for the shopper for the whole
// authentication window: the window counts from when it began waiting,
// not from its claim.
func (s *Service) abandoned(a Attempt) bool {
	return !a.Wait.Since.IsZero() && !s.cfg.Now().Before(s.windowEnd(a))
}

// windowEnd is when a's authentication window ends: AuthenticationWindow
// after it began waiting.
func (s *Service) windowEnd(a Attempt) time.Time {
	return a.Wait.Since.Add(s.cfg.AuthenticationWindow)
}

// nextAction is what the shopper of waiting attempt a must do, and until when.
func (s *Service) nextAction(a Attempt) *NextAction {
	return &NextAction{Type: NextActionRedirect, URL: a.Wait.URL, ExpiresAt: s.windowEnd(a)}
}

// checkAction reads the provider about a, which waits for the shopper, for
// a retry of its key or a poll: at most once per AuthenticationRecheck of
// all the instances' readers together, so that polling pages cannot flood
// the provider. A final answer is recorded, fenced on the fence
// as it is now, and returned; otherwise a as it was. It holds no lease and
// sends nothing: a read changes nothing at the provider.
func (s *Service) checkAction(ctx context.Context, m Merchant, a Attempt) Attempt {
	a, _ = s.readAction(ctx, m, a, s.cfg.AuthenticationRecheck)
	return a // a failed read is logged; the next poll or the reconciler reads again
}

// readAction is checkAction with its own interval between reads (zero for
// a provider's webhook, which says something changed), and the error of a
// read or a write that failed, for a caller that can have it done again.
func (s *Service) readAction(ctx context.Context, m Merchant, a Attempt, recheck time.Duration) (Attempt, error) {
	now := s.cfg.Now()
	if now.Sub(a.Wait.CheckedAt) < recheck {
		return a, nil
	}
	current, ok, err := s.store.takeActionCheck(ctx, a, now, now.Add(-recheck))
	if err != nil || !ok {
		return a, err // !ok: another reader has this turn, or the attempt is final
	}
	log := s.attemptLog(m, current)
	o, err := s.op(current).read(ctx, m, current)
	switch {
	case err != nil:
		log.WarnContext(ctx, "could not read the provider about the attempt that waits for authentication", "err", err)
		return current, err
	case o == nil || o.State == outcomeWaiting || o.State == outcomePending:
		return current, nil
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalizeTimeout)
	defer cancel()
	done, err := s.finalize(writeCtx, current, *o, byRequest,
		s.note(ctx, current, history.ProviderRead, outcomeDetail(*o, 0)),
		s.note(ctx, current, history.WaitEnded, "the provider says the shopper finished authenticating"))
	if errors.Is(err, errFenced) {
		if stored, err := s.store.getByID(writeCtx, a.ID); err == nil {
			return stored, nil
		}
		return current, nil
	}
	if err != nil {
		log.WarnContext(ctx, "could not record how authentication ended; the reconciler will", "err", err)
		return current, err
	}
	log.InfoContext(ctx, "authentication ended; attempt finalized", "status", done.Status, "provider_id", o.ProviderID)
	return done, nil
}

// observeAuthentication counts how a's authentication ended, when a
// waited, and how long the shopper took.
func (s *Service) observeAuthentication(a Attempt, o outcome, now time.Time) {
	if a.Wait.Since.IsZero() {
		return
	}
	ended := "completed"
	switch {
	case o.succeeded():
	case o.Failure.Code == FailureAuthenticationAbandoned:
		ended = "abandoned"
	default:
		ended = "failed"
	}
	s.metrics.AuthenticationEnded.WithLabelValues(ended).Inc()
	s.metrics.AuthenticationWait.Observe(now.Sub(a.Wait.Since).Seconds())
}

// Recheck reads the provider about the attempt with id, because the
// provider said it changed (a verified webhook event): an attempt that
// waits for the shopper, or a refund the provider holds pending, is read
// now, and its outcome recorded if final; a refund that succeeded is read
// too, for one that failed later. An
// event never decides anything by itself, so a forged, redelivered or
// reordered one changes nothing: what counts is what the provider says
// when asked. Nothing is ever sent. An unknown id, a final attempt, or
// one that does not wait (its holder or the reconciler has it) is left
// as it is. An error means the read or its record failed, and the
// provider should say it again.
func (s *Service) Recheck(ctx context.Context, id uuid.UUID) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	a, err := s.store.getByID(ctx, id)
	if errors.Is(err, errNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	m, err := s.store.merchant(ctx, a.MerchantID)
	if err != nil {
		return "", err
	}
	if !a.waiting() {
		return s.op(a).recheck(ctx, m, a)
	}
	a, err = s.readAction(ctx, m, a, 0)
	return a.Status, err
}
