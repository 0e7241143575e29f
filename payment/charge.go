package payment

import (
	"context"
	"errors"
	"net/url"
	"time"

	goretry "github.com/sethvargo/go-retry"
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
	pc, err := s.callProvider(providerCtx, m, a)
	cancel()
	if err != nil {
		// Nobody knows yet whether the card was charged. Hand the attempt to
		// the reconciler (or the client's retry) now, not when the lease ends.
		a = s.release(ctx, log, a, releaseBudget)
		log.WarnContext(ctx, "provider outcome unknown; attempt stays PROCESSING for the reconciler", "err", err)
		s.metrics.OutcomeUnknown.Inc()
		return s.fresh(a)
	}
	s.cfg.Fault(FaultAfterProvider)
	if pc.waiting() {
		// The shopper must authenticate first: nothing more to send, ever.
		return s.fresh(s.await(ctx, log, a, pc.ProviderCharge))
	}
	if pc.pending {
		// The provider holds the refund and will make it final later: it is
		// read from now on, never sent again.
		return s.fresh(s.pend(ctx, a))
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
			done, err = s.finalize(ctx, a, pc, byRequest)
			if code := ErrorCode(err); err != nil && !errors.Is(err, errFenced) && (code == EUNAVAILABLE || code == EINTERNAL) {
				log.WarnContext(ctx, "could not record the provider's answer yet; retrying", "err", err)
				return goretry.RetryableError(err)
			}
			return err
		})
	switch {
	case errors.Is(err, errFenced):
		done, err = s.store.getByID(writeCtx, a.ID)
		if err == nil && recordedBy(done, a, pc) {
			// A recording of ours committed, and only its reply was lost
			// (a plain charge's recording is one statement, committed on
			// its own): this request made the charge.
			log.InfoContext(ctx, "the provider's answer was recorded by an earlier try of this request", "provider_id", pc.ID)
			return s.fresh(done)
		}
		// Someone else finalized the attempt first; theirs is the stored answer.
		log.InfoContext(ctx, "attempt was finalized by another holder; answering with the stored result")
		if err == nil {
			return s.replay(done)
		}
		fallthrough
	case err != nil:
		// The provider answered but the answer is not stored. The attempt stays
		// PROCESSING; the reconciler asks the provider by our key when the lease ends.
		log.ErrorContext(ctx, "could not record the provider's answer; attempt stays PROCESSING",
			"provider_charge_id", pc.ID, "succeeded", pc.Succeeded, "err", err)
		return s.fresh(a)
	}
	s.cfg.Fault(FaultAfterFinalize)
	log.InfoContext(ctx, string(a.Kind)+" attempt finalized", "status", done.Status, "provider_id", pc.ID)
	return s.fresh(done)
}

// recordedBy reports whether stored is held attempt a as finalized with
// the provider's charge pc: still under a's attempt number (nobody took it
// over), with pc's charge.
func recordedBy(stored, a Attempt, pc answer) bool {
	return pc.Succeeded && stored.Number == a.Number && stored.Kind == KindCharge &&
		stored.Charge != nil && stored.Charge.ProviderChargeID == pc.ID
}

// providerRequest is the charge request for attempt a. It must be the same
// on every send, or the provider refuses the repeat of our key.
func providerRequest(m Merchant, a Attempt) ProviderChargeRequest {
	req := ProviderChargeRequest{
		IdempotencyKey:   a.ProviderKey,
		AttemptID:        a.ID,
		AttemptCreatedAt: a.CreatedAt,
		Amount:           a.Input.Amount,
		Currency:         a.Input.Currency,
		PaymentMethod:    a.Input.PaymentMethod,
		Description:      a.Input.Description,
		Metadata: map[string]string{
			"chargeonce_attempt_id":  a.ID.String(),
			"client_idempotency_key": a.IdempotencyKey,
			"merchant":               m.Name,
		},
	}
	if a.Input.OrderID != "" {
		req.Metadata["order_id"] = a.Input.OrderID
	}
	if a.Input.ReturnURL != "" {
		req.ReturnURL = returnURL(a.Input.ReturnURL, a.IdempotencyKey)
	}
	return req
}

// returnURL is raw with the attempt's idempotency key added to its query
// (ReturnKeyParam), so that the page the shopper comes back to can resume
// the attempt even when its own storage is gone. raw was validated.
func returnURL(raw, key string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set(ReturnKeyParam, key)
	u.RawQuery = q.Encode()
	return u.String()
}

// callProvider sends a's operation under our provider key. An unknown
// outcome is retried a few times within the retry budget; that is safe
// because the provider deduplicates on the key.
func (s *Service) callProvider(ctx context.Context, m Merchant, a Attempt) (answer, error) {
	backoff := goretry.WithMaxDuration(s.cfg.ProviderRetryBudget,
		goretry.WithMaxRetries(s.cfg.ProviderRetries, goretry.NewExponential(200*time.Millisecond)))
	var pc answer
	err := goretry.Do(ctx, backoff, func(ctx context.Context) error {
		var err error
		pc, err = s.create(ctx, m, a)
		if errors.Is(err, ErrOutcomeUnknown) {
			return goretry.RetryableError(err)
		}
		return err
	})
	return pc, err
}
