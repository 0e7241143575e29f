package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
	"chargeonce/sqlc"
)

// The store's refunds: the claim that reserves a charge's money, the
// fenced write that records a refund, and the reads.

func init() { termsFromRow[KindRefund] = refundTermsFromRow }

// refundColumns are a refund's columns as a read of its attempt carries
// them.
type refundColumns struct {
	providerRefundID                    *string
	createdAt                           *time.Time
	status, failureCode, failureMessage *string
}

// refundTermsFromRow are the terms of a refund attempt's row: the charge
// it refunds (as the provider names it, when the read joined it), and its
// refund when it SUCCEEDED.
func refundTermsFromRow(row attemptRow) Terms {
	r := row.ChargeAttempt
	t := RefundTerms{Of: deref(r.ChargeID), OfProvider: deref(row.providerChargeID), Amount: r.Amount,
		Currency: r.Currency, Reason: deref(r.Description)}
	if Status(r.Status) != StatusSucceeded {
		return t
	}
	c := row.refund
	t.Refund = &Refund{ID: deref(r.RefundID), ChargeID: t.Of, Amount: t.Amount, Currency: t.Currency, Reason: t.Reason,
		ProviderRefundID: deref(c.providerRefundID), Status: StatusSucceeded, CreatedAt: deref(c.createdAt)}
	if c.failureCode != nil {
		t.Refund.Status = Status(deref(c.status))
		t.Refund.Failure = &Failure{Code: *c.failureCode, Message: deref(c.failureMessage)}
	}
	return t
}

// withRefundOf is a, a refund attempt, with the provider's id of the
// charge it refunds.
func (a Attempt) withRefundOf(providerChargeID string) Attempt {
	t := a.refund()
	t.OfProvider = providerChargeID
	a.Terms = t
	return a
}

// withRefund is a, a refund attempt, with the refund r it made.
func (a Attempt) withRefund(r *Refund) Attempt {
	t := a.refund()
	t.Refund = r
	a.Terms = t
	return a
}

// claimRefund claims a's key for a refund of requested of a's charge (what
// remains refundable when requested is 0), in one transaction that first
// locks the charge, so that the refunds of one charge are claimed one at a
// time: claimedByUs with a as inserted (its amount, currency and the
// provider's charge id filled in), foundStored with the key's stored
// attempt, ECHARGENOTFOUND for a charge the merchant does not have, and
// EREFUNDEXCEEDS (with what remains) for more than remains; then nothing
// is claimed. The amount is reserved by one conditional update in the
// same transaction, behind which charges_refunds_check holds.
func (s *store) claimRefund(ctx context.Context, a Attempt, requested int64) (claim, error) {
	var c claim
	of := a.refund().Of
	err := s.inTx(ctx, func(q *txQueries) error {
		charge, err := q.LockChargeForRefund(ctx, sqlc.LockChargeForRefundParams{ID: of, MerchantID: a.MerchantID})
		if isNotFound(err) {
			return &Error{Code: ECHARGENOTFOUND, Field: "input.chargeId",
				Message: "no charge of this merchant has this id; nothing was refunded"}
		}
		if err != nil {
			return err
		}
		remaining := charge.Refundable - charge.AmountReserved
		amount := requested
		if amount == 0 {
			amount = remaining
		}
		exceeds := &Error{Code: EREFUNDEXCEEDS, Field: "input.amount", Refundable: remaining,
			Message: fmt.Sprintf("the refund exceeds what remains refundable of the charge (%d); nothing was refunded", remaining)}
		if amount == 0 {
			// Nothing remains: unless the key was used already, refused.
			stored, err := storedAttempt(ctx, q.Queries, a.MerchantID, uuid.Nil, a.IdempotencyKey)
			if isNotFound(err) {
				return exceeds
			}
			c = claim{outcome: foundStored, attempt: stored}
			return err
		}
		src := claimSource(ctx, s.hist)
		row, err := q.ClaimRefundAttempt(ctx, sqlc.ClaimRefundAttemptParams{
			ID: a.ID, MerchantID: a.MerchantID, IdempotencyKey: a.IdempotencyKey, Fingerprint: a.Fingerprint,
			ProviderKey: storedProviderKey(a.ID, a.ProviderKey), Amount: amount, Currency: charge.Currency, ChargeID: &of,
			Description: optional(a.refund().Reason), LockedUntil: a.LockedUntil, ExpiresAt: a.ExpiresAt,
			ClaimRequestID: src.RequestID, ClaimInstance: src.Instance, ClaimSource: src.Rest, CreatedAt: a.CreatedAt,
		})
		if isNotFound(err) {
			// The key is taken: the insert waited for whoever took it, so a
			// new statement sees the stored attempt.
			if c, err = storedClaim(ctx, q, a); err != nil {
				return err
			}
			return errRollback
		}
		if err != nil {
			return err
		}
		if _, err := q.ReserveRefund(ctx, sqlc.ReserveRefundParams{Amount: amount, ID: of}); isNotFound(err) {
			return exceeds // rolls the claim back
		} else if err != nil {
			return err
		}
		c = claim{outcome: claimedByUs, attempt: attemptFromRow(row).withRefundOf(charge.ProviderChargeID)}
		return nil
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return c, interpretError(err)
}

// storedClaim is the claim that found a's key stored, read in q's
// transaction, which the caller then rolls back (errRollback).
func storedClaim(ctx context.Context, q *txQueries, a Attempt) (claim, error) {
	stored, err := storedAttempt(ctx, q.Queries, a.MerchantID, uuid.Nil, a.IdempotencyKey)
	return claim{outcome: foundStored, attempt: stored}, err
}

// errRollback ends a transaction that found what it needed and must
// change nothing.
var errRollback = errors.New("rolled back: nothing to change")

// succeedRefund records the refund, finalizes its attempt and writes its
// refund.succeeded event in one transaction, fenced on a's fence;
// now is when the event occurred.
func (s *store) succeedRefund(ctx context.Context, a Attempt, providerRefundID string, now, expiresAt time.Time) (Attempt, error) {
	var done Attempt
	t := a.refund()
	err := s.inTx(ctx, func(q *txQueries) error {
		r, err := q.InsertRefund(ctx, sqlc.InsertRefundParams{
			ID: newID(), MerchantID: a.MerchantID, ChargeID: t.Of, Amount: t.Amount, Currency: t.Currency,
			Reason: optional(t.Reason), ProviderRefundID: providerRefundID,
		})
		if kind, constraint := db.Classify(err); kind == db.UniqueViolation && constraint == constraintProviderRefundID {
			// Recorded already, by whoever finalized the attempt.
			return errFenced
		}
		if err != nil {
			return err
		}
		row, err := q.SucceedRefundAttempt(ctx, sqlc.SucceedRefundAttemptParams{RefundID: &r.ID, Now: now, ExpiresAt: expiresAt, ID: a.ID, Fence: a.Fence})
		if isNotFound(err) {
			return errFenced // rolls the refund back: the record's owner writes it
		}
		if err != nil {
			return err
		}
		done = attemptFromRow(row).withRefundOf(t.OfProvider).withRefund(refundFromRow(r))
		return insertEvent(ctx, q, refundEventOf(done, now))
	})
	if errors.Is(err, errFenced) {
		return Attempt{}, errFenced
	}
	return done, interpretError(err)
}

// pend records that the provider holds a's operation pending since now
// (or since it first did), with the reconciler's next read at nextCheck,
// fenced on a's fence.
func (s *store) pend(ctx context.Context, a Attempt, now, nextCheck time.Time) (Attempt, error) {
	row, err := s.q.PendRefundAttempt(ctx, sqlc.PendRefundAttemptParams{Now: now, NextCheck: nextCheck, ID: a.ID, Fence: a.Fence})
	if isNotFound(err) {
		return Attempt{}, errFenced
	}
	if err != nil {
		return Attempt{}, interpretError(err)
	}
	pending := attemptFromRow(row)
	pending.Terms = a.Terms // as it was: pending changes none of it
	return pending, nil
}

// providerChargeID is the provider's id of the charge with id.
func (s *store) providerChargeID(ctx context.Context, id uuid.UUID) (string, error) {
	pid, err := s.q.GetRefundCharge(ctx, id)
	return pid, interpretError(err)
}

// refunds is what the merchant's charge has refunded, and its refunds,
// oldest first; ECHARGENOTFOUND when the merchant has no such charge.
func (s *store) refunds(ctx context.Context, merchantID, chargeID uuid.UUID) (int64, []Refund, error) {
	refunded, err := s.q.GetChargeRefunded(ctx, sqlc.GetChargeRefundedParams{ID: chargeID, MerchantID: merchantID})
	if isNotFound(err) {
		return 0, nil, Errorf(ECHARGENOTFOUND, "no charge of this merchant has this id")
	}
	if err != nil {
		return 0, nil, interpretError(err)
	}
	rows, err := s.q.ListChargeRefunds(ctx, sqlc.ListChargeRefundsParams{ChargeID: chargeID, MerchantID: merchantID})
	if err != nil {
		return 0, nil, interpretError(err)
	}
	out := make([]Refund, len(rows))
	for i, r := range rows {
		out[i] = *refundFromRow(r)
	}
	return refunded, out, nil
}

// refundFromRow converts a refunds row.
func refundFromRow(r sqlc.Refund) *Refund {
	out := &Refund{ID: r.ID, ChargeID: r.ChargeID, Amount: r.Amount, Currency: r.Currency, Reason: deref(r.Reason),
		ProviderRefundID: r.ProviderRefundID, Status: Status(r.Status), CreatedAt: r.CreatedAt}
	if r.FailureCode != nil {
		out.Failure = &Failure{Code: *r.FailureCode, Message: deref(r.FailureMessage)}
	}
	return out
}

// processingRefunds lists up to limit refund attempts still PROCESSING,
// oldest first.
func (s *store) processingRefunds(ctx context.Context, limit int) ([]ProcessingRefund, error) {
	rows, err := s.q.ListProcessingRefunds(ctx, int32(limit))
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]ProcessingRefund, len(rows))
	for i, r := range rows {
		out[i] = ProcessingRefund{Merchant: r.MerchantName, IdempotencyKey: r.IdempotencyKey, ProviderKey: providerKeyOf(r.ID, r.ProviderKey),
			ChargeID: deref(r.ChargeID), ProviderChargeID: r.ProviderChargeID, Amount: r.Amount, Currency: r.Currency,
			Holders: int(r.Fence), CreatedAt: r.CreatedAt, LockedUntil: r.LockedUntil, PendingSince: deref(r.PendingSince)}
	}
	return out, nil
}

// reverseRefund records that a's refund, which succeeded, failed later
// (f says why): the refund FAILED, its amount refundable again, and
// refund.failed written, in one transaction, once; reversed is false when
// it was already.
func (s *store) reverseRefund(ctx context.Context, a Attempt, f Failure, now time.Time) (done Attempt, reversed bool, err error) {
	err = s.inTx(ctx, func(q *txQueries) error {
		r, err := q.ReverseRefund(ctx, sqlc.ReverseRefundParams{FailureCode: f.Code, FailureMessage: f.Message, Now: now, ID: a.refund().Refund.ID})
		if isNotFound(err) {
			return errRollback
		}
		if err != nil {
			return err
		}
		if err := q.GiveBackRefund(ctx, sqlc.GiveBackRefundParams{Amount: r.Amount, ID: r.ChargeID}); err != nil {
			return err
		}
		done = a.withRefund(refundFromRow(r))
		reversed = true
		return insertEvent(ctx, q, refundEventOf(done, now))
	})
	if errors.Is(err, errRollback) {
		return a, false, nil
	}
	return done, reversed, interpretError(err)
}

// takeLateChecks takes up to limit failed attempts whose late-charge read
// is due at now, each given its next read first (TakeLateChecks).
func (s *store) takeLateChecks(ctx context.Context, now time.Time, limit int) ([]Attempt, error) {
	rows, err := s.q.TakeLateChecks(ctx, sqlc.TakeLateChecksParams{Now: now, MaxAttempts: int32(limit)})
	if err != nil {
		return nil, interpretError(err)
	}
	as := make([]Attempt, len(rows))
	for i, r := range rows {
		as[i] = attemptFromRow(r)
	}
	return as, nil
}

// endLateWatch ends the late-charge watch of the attempt with id.
func (s *store) endLateWatch(ctx context.Context, id uuid.UUID) error {
	return interpretError(s.q.EndLateWatch(ctx, id))
}

// failRefund finalizes refund attempt a as FAILED and writes its
// refund.failed event, giving its reservation back, in one transaction
// fenced like succeedRefund.
func (s *store) failRefund(ctx context.Context, a Attempt, f Failure, now, expiresAt time.Time) (Attempt, error) {
	return s.fail(ctx, a, f, now, expiresAt, func(q *txQueries, done Attempt) error {
		t := a.refund()
		if err := q.ReleaseRefundReservation(ctx, sqlc.ReleaseRefundReservationParams{Amount: t.Amount, ID: t.Of}); err != nil {
			return err
		}
		return insertEvent(ctx, q, refundEventOf(done, now))
	})
}
