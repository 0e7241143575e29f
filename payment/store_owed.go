package payment

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
	"chargeonce/sqlc"
)

// The store's charges that chargeonce owes back: a late charge of a failed
// attempt (late.go) and a provider's duplicate charges of one attempt
// (duplicate.go), each recorded once whoever finds it, and the duplicates'
// refunds taken when due.

// recordLate records the late provider charge id of failed attempt a as a
// charge (once, whoever finds it), names it on a, and writes
// charge.late_refunded, in one transaction, with the provider charges
// duplicates of it, if any, which it returns; recorded is false when
// another reader recorded it first, and a then names theirs.
//
// A late authorization (a manual attempt's) is recorded as one, open until
// authorizedUntil, for its void.
func (s *store) recordLate(ctx context.Context, a Attempt, id string, duplicateIDs []string, authorizedUntil time.Time, now time.Time) (_ Attempt, recorded bool, duplicates []Charge, err error) {
	var done Attempt
	in := a.charge().Input
	err = s.inTx(ctx, func(q *txQueries) error {
		p := sqlc.InsertChargeParams{
			ID: newID(), MerchantID: a.MerchantID, Amount: in.Amount, Currency: in.Currency,
			Description: optional(in.Description), ProviderChargeID: id, CaptureMethod: optional(manual(in.CaptureMethod)),
		}
		if in.CaptureMethod == CaptureManual {
			p.AuthorizationExpiresAt = &authorizedUntil
		}
		c, err := q.InsertCharge(ctx, p)
		if kind, constraint := db.Classify(err); kind == db.UniqueViolation && constraint == constraintProviderChargeID {
			return errFenced // recorded by another reader: its attempt names it
		}
		if err != nil {
			return err
		}
		row, err := q.RecordLateCharge(ctx, sqlc.RecordLateChargeParams{LateChargeID: &c.ID, ID: a.ID})
		if isNotFound(err) {
			return errFenced
		}
		if err != nil {
			return err
		}
		done = attemptFromRow(row)
		if err := insertEvent(ctx, q, lateEventOf(done, chargeOf(done, &c.ID, c.ProviderChargeID, &c.CreatedAt), now)); err != nil {
			return err
		}
		duplicates, err = recordDuplicates(ctx, q, done, duplicateIDs, now)
		return err
	})
	if errors.Is(err, errFenced) {
		got, err := s.getByID(ctx, a.ID)
		if err != nil {
			return Attempt{}, false, nil, err
		}
		if got.LateChargeID == uuid.Nil {
			return Attempt{}, false, nil, errors.New("the late charge is recorded, but not on its attempt")
		}
		return got, false, nil, nil
	}
	if err != nil {
		return done, false, nil, interpretError(err)
	}
	return done, true, duplicates, nil
}

// recordDuplicates records the provider charges duplicates of attempt a
// (their refund due now) and their charge.duplicate_refunded events, in
// the caller's transaction, and returns the charges it recorded: a
// duplicate recorded already, by another reader, is skipped.
func recordDuplicates(ctx context.Context, q *txQueries, a Attempt, duplicates []string, now time.Time) ([]Charge, error) {
	var recorded []Charge
	in := a.charge().Input
	for _, id := range duplicates {
		row, err := q.InsertDuplicateCharge(ctx, sqlc.InsertDuplicateChargeParams{
			ID: newID(), MerchantID: a.MerchantID, Amount: in.Amount, Currency: in.Currency,
			OrderID: optional(in.OrderID), Description: optional(in.Description), ProviderChargeID: id,
			DuplicateOf: &a.ID, RefundDueAt: &now,
		})
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c := chargeOf(a, &row.ID, row.ProviderChargeID, &row.CreatedAt)
		e := chargeEventOf(a, now)
		e.Type, e.Failure = EventChargeDuplicateRefunded, nil
		e.Charge = &EventCharge{ID: c.ID, ProviderChargeID: c.ProviderChargeID, CreatedAt: c.CreatedAt.UTC()}
		if err := insertEvent(ctx, q, e); err != nil {
			return nil, err
		}
		recorded = append(recorded, *c)
	}
	return recorded, nil
}

// takeDueDuplicates takes up to limit duplicates whose refund is due at
// now, each put off a minute (TakeDueDuplicateRefunds).
func (s *store) takeDueDuplicates(ctx context.Context, now time.Time, limit int) ([]dueDuplicate, error) {
	rows, err := s.q.TakeDueDuplicateRefunds(ctx, sqlc.TakeDueDuplicateRefundsParams{Now: now, MaxCharges: int32(limit)})
	if err != nil {
		return nil, interpretError(err)
	}
	due := make([]dueDuplicate, len(rows))
	for i, c := range rows {
		due[i] = dueDuplicate{ID: c.ID, MerchantID: c.MerchantID, ProviderChargeID: c.ProviderChargeID, AttemptID: deref(c.DuplicateOf)}
	}
	return due, nil
}

// endDuplicateRefundDue records that duplicate id's refund is claimed.
func (s *store) endDuplicateRefundDue(ctx context.Context, id uuid.UUID) error {
	return interpretError(s.q.EndDuplicateRefundDue(ctx, id))
}
