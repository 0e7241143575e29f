package payment

import (
	"context"

	"chargeonce/metrics"
)

// The kinds of attempt. A charge and a refund are one idempotent operation
// each: the claim of a key (claim.go, refund.go), the lease and its
// holders (lease.go), the provider call (charge.go), the settling of an
// attempt a new holder took over (settle.go), the reconciler, the answers
// and retention are the same for both. What differs is here: what is sent
// to the provider, how it is read back, and what its answer records. A
// third kind is a case in each of create, find and finalize, and a claim.

// answer is the provider's word on an attempt, whatever its kind: a
// charge's as it came, or a refund's in a charge's terms (its ID,
// Succeeded, FailureCode and FailureMessage), with pending set while the
// provider holds the refund without having made it final. duplicates are
// the provider's other successful charges for the attempt, when a lookup
// found them (settleOn).
type answer struct {
	ProviderCharge
	pending    bool
	duplicates []string
}

// refundAnswer is the provider's refund as an answer.
func refundAnswer(r ProviderRefund) answer {
	return answer{ProviderCharge: ProviderCharge{ID: r.ID, Succeeded: r.State == RefundSucceeded,
		FailureCode: r.FailureCode, FailureMessage: r.FailureMessage}, pending: r.State == RefundPending}
}

// create sends a's operation to the provider under a's provider key: a
// charge, or a refund. The provider deduplicates on the key, so a second
// send of the same attempt gets the first one's answer.
func (s *Service) create(ctx context.Context, m Merchant, a Attempt) (answer, error) {
	if a.Kind == KindRefund {
		req, err := s.refundRequest(ctx, m, a)
		if err != nil {
			return answer{}, err
		}
		r, err := s.provider.CreateRefund(ctx, req)
		return refundAnswer(r), err
	}
	pc, err := s.provider.CreateCharge(ctx, providerRequest(m, a))
	return answer{ProviderCharge: pc}, err
}

// find reads what the provider holds for a, without sending anything; nil
// when it holds nothing.
func (s *Service) find(ctx context.Context, m Merchant, a Attempt) (*answer, error) {
	if a.Kind == KindRefund {
		req, err := s.refundRequest(ctx, m, a)
		if err != nil {
			return nil, err
		}
		r, err := s.provider.FindRefund(ctx, req)
		if err != nil || r == nil {
			return nil, err
		}
		ans := refundAnswer(*r)
		return &ans, nil
	}
	charges, err := s.provider.FindCharges(ctx, providerRequest(m, a))
	if err != nil {
		return nil, err
	}
	pc, duplicates := settleOn(charges)
	if pc == nil {
		return nil, nil
	}
	return &answer{ProviderCharge: *pc, duplicates: duplicates}, nil
}

// finalize records the provider's definitive answer on a, fenced on a's
// attempt number, for its holder by: the charge or the refund with its
// attempt SUCCEEDED, or the attempt FAILED (a refund's reservation given
// back), each with its event, in one transaction.
func (s *Service) finalize(ctx context.Context, a Attempt, ans answer, by holder) (Attempt, error) {
	now := s.cfg.Now()
	expiresAt := now.Add(s.cfg.Retention)
	var done Attempt
	var err error
	outcome := metrics.BySucceeded
	switch {
	case ans.Succeeded && a.Kind == KindRefund:
		done, err = s.store.succeedRefund(ctx, a, ans.ID, now, expiresAt)
	case ans.Succeeded:
		var duplicates []Charge
		done, duplicates, err = s.store.succeed(ctx, a, ans.ProviderCharge, ans.duplicates, now, expiresAt)
		s.announceDuplicates(ctx, a, ans.ID, duplicates)
	default:
		outcome = metrics.ByFailed
		var watch lateWatch
		if a.Kind == KindCharge && ans.FailureCode == FailureProviderUnavailable {
			// A send may still be in flight: watch for a late charge.
			watch = lateWatch{first: now.Add(lateChargeFirstCheck), until: now.Add(s.cfg.LateChargeWatch)}
		}
		done, err = s.store.fail(ctx, a, Failure{Code: ans.FailureCode, Message: ans.FailureMessage}, now, expiresAt, watch)
	}
	if err != nil {
		return done, err
	}
	if a.Kind == KindRefund {
		s.metrics.Refunds.WithLabelValues(outcome, by.label()).Inc()
		return done, nil
	}
	s.metrics.Charges.WithLabelValues(outcome, by.label()).Inc()
	s.observeAuthentication(a, ans.ProviderCharge, now)
	return done, nil
}

// pend records that the provider holds a's refund without having made it
// final: nothing is sent for it again, and the reconciler reads it at its
// next look, RefundCheckInterval from now. When the write fails, the
// attempt stays held until its lease ends, and the reconciler reads it then.
func (s *Service) pend(ctx context.Context, a Attempt) Attempt {
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
