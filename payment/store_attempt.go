package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
	"chargeonce/sqlc"
)

// The store's charge attempts: the claim, its lookup, the fenced writes that
// finalize it, and the takeovers. Every row is converted to an Attempt here.

// claim inserts a, and when the merchant's key was claimed already reads
// the stored attempt in the same statement, so that a replay costs one round
// trip: claimedByUs with a as inserted, foundStored with the stored attempt
// and its charge, or notVisibleYet when there was none to read (the key was
// claimed a moment after the statement's snapshot, or the order is paid).
// An attempt on a checkout session is inserted only while the session takes
// it (open, unexpired at a.CreatedAt, below maxSessionAttempts), which it
// counts. The claim takes its connection first, so that a failure to get
// one (the database is away, or the pool is exhausted) is known to have
// sent nothing.
func (s *store) claim(ctx context.Context, a Attempt, maxSessionAttempts int) (claim, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return claim{}, interpretError(fmt.Errorf("%w: %w", db.ErrNotSent, err))
	}
	defer conn.Release()
	row, err := sqlc.New(conn).ClaimChargeAttempt(ctx, sqlc.ClaimChargeAttemptParams{
		ID:                 a.ID,
		MerchantID:         a.MerchantID,
		IdempotencyKey:     a.IdempotencyKey,
		Fingerprint:        a.Fingerprint,
		ProviderKey:        a.ProviderKey,
		Amount:             a.Input.Amount,
		Currency:           a.Input.Currency,
		PaymentMethod:      optional(a.Input.PaymentMethod),
		OrderID:            optional(a.Input.OrderID),
		Description:        optional(a.Input.Description),
		LockedUntil:        a.LockedUntil,
		ExpiresAt:          a.ExpiresAt,
		CheckoutSessionID:  optionalID(a.Input.CheckoutSessionID),
		ReturnURL:          optional(a.Input.ReturnURL),
		KeySessionID:       optionalID(a.KeySession),
		Now:                a.CreatedAt,
		MaxSessionAttempts: int32(maxSessionAttempts),
	})
	if err = interpretError(err); err == errNotFound {
		return claim{outcome: notVisibleYet}, nil
	}
	if err != nil {
		return claim{}, err
	}
	c := claim{outcome: foundStored, attempt: withOutcome(row.ChargeAttempt, row.ProviderChargeID, row.ChargeCreatedAt, refundColumns{row.ProviderRefundID, row.RefundCreatedAt, row.RefundStatus, row.RefundFailureCode, row.RefundFailureMessage})}
	if row.Claimed {
		c.outcome = claimedByUs
	}
	return c, nil
}

// isNotFound reports whether a fenced write changed no row: someone else
// finalized or took over the attempt.
func isNotFound(err error) bool {
	kind, _ := db.Classify(err)
	return kind == db.NotFound
}

// get loads the merchant's attempt for key among the keys of keySession
// (uuid.Nil: the merchant's own), with its charge or failure.
func (s *store) get(ctx context.Context, merchantID, keySession uuid.UUID, key string) (Attempt, error) {
	a, err := storedAttempt(ctx, s.q, merchantID, keySession, key)
	return a, interpretError(err)
}

// storedAttempt is get through q, which may be a transaction's.
func storedAttempt(ctx context.Context, q *sqlc.Queries, merchantID, keySession uuid.UUID, key string) (Attempt, error) {
	row, err := q.GetChargeAttempt(ctx, sqlc.GetChargeAttemptParams{MerchantID: merchantID, IdempotencyKey: key,
		KeySessionID: optionalID(keySession)})
	if err != nil {
		return Attempt{}, err
	}
	return withOutcome(row.ChargeAttempt, row.ProviderChargeID, row.ChargeCreatedAt, refundColumns{row.ProviderRefundID, row.RefundCreatedAt, row.RefundStatus, row.RefundFailureCode, row.RefundFailureMessage}), nil
}

// getPage loads the newest attempt a checkout page of the merchant made
// under key, among its sessions' keys.
func (s *store) getPage(ctx context.Context, merchantID uuid.UUID, key string) (Attempt, error) {
	row, err := s.q.GetPageChargeAttempt(ctx, sqlc.GetPageChargeAttemptParams{MerchantID: merchantID, IdempotencyKey: key})
	if err != nil {
		return Attempt{}, interpretError(err)
	}
	return withOutcome(row.ChargeAttempt, row.ProviderChargeID, row.ChargeCreatedAt, refundColumns{row.ProviderRefundID, row.RefundCreatedAt, row.RefundStatus, row.RefundFailureCode, row.RefundFailureMessage}), nil
}

// getByID loads the attempt with id, with its charge or failure.
func (s *store) getByID(ctx context.Context, id uuid.UUID) (Attempt, error) {
	row, err := s.q.GetChargeAttemptByID(ctx, id)
	if err != nil {
		return Attempt{}, interpretError(err)
	}
	return withOutcome(row.ChargeAttempt, row.ProviderChargeID, row.ChargeCreatedAt, refundColumns{row.ProviderRefundID, row.RefundCreatedAt, row.RefundStatus, row.RefundFailureCode, row.RefundFailureMessage}), nil
}

// refundColumns are a refund's columns as a read of its attempt carries
// them.
type refundColumns struct {
	providerRefundID                    *string
	createdAt                           *time.Time
	status, failureCode, failureMessage *string
}

// withOutcome converts a stored attempt read with the columns of its
// outcome: a charge's, or a refund's.
func withOutcome(row sqlc.ChargeAttempt, providerChargeID *string, chargeCreatedAt *time.Time, r refundColumns) Attempt {
	a := attemptFromRow(row)
	if a.Kind == KindRefund {
		a.RefundOfProvider = deref(providerChargeID)
	}
	switch {
	case a.Status != StatusSucceeded:
	case a.Kind == KindRefund:
		a.Refund = refundOf(a, deref(row.RefundID), deref(r.providerRefundID), deref(r.createdAt))
		if r.failureCode != nil {
			a.Refund.Status = Status(deref(r.status))
			a.Refund.Failure = &Failure{Code: *r.failureCode, Message: deref(r.failureMessage)}
		}
	default:
		a.Charge = chargeOf(a, row.ChargeID, deref(providerChargeID), chargeCreatedAt)
	}
	return a
}

// succeed records the charge pc, finalizes the attempt and writes its
// charge.succeeded event to the outbox, fenced on a's attempt number, with
// the provider charges duplicates of it, if any, which it returns; now is when the event
// occurred, and when the charge was recorded. A plain charge is one
// statement (RecordChargeSucceeded), committed on its own: one round trip
// where a transaction of its three writes took five. Duplicates and a
// checkout session to mark paid join it in one transaction.
func (s *store) succeed(ctx context.Context, a Attempt, pc ProviderCharge, duplicateIDs []string, now, expiresAt time.Time) (_ Attempt, duplicates []Charge, _ error) {
	// PostgreSQL keeps microseconds: the first answer says what a replay
	// will read back.
	now = now.Truncate(time.Microsecond)
	chargeID := newID()
	paid := a
	paid.Charge = chargeOf(a, &chargeID, pc.ID, &now)
	ev := eventOf(paid, now)
	body, err := json.Marshal(ev)
	if err != nil {
		return Attempt{}, nil, err
	}
	record := func(q *sqlc.Queries) (Attempt, error) {
		row, err := q.RecordChargeSucceeded(ctx, sqlc.RecordChargeSucceededParams{
			ChargeID: chargeID, Now: now, ExpiresAt: expiresAt, ID: a.ID, Attempt: a.Number,
			ProviderChargeID: pc.ID, EventID: ev.ID, EventBody: body,
		})
		if kind, constraint := db.Classify(err); isNotFound(err) || kind == db.UniqueViolation && constraint == constraintProviderChargeID {
			// Finalized or taken over by someone else; or this provider
			// charge is recorded already: the provider key is the
			// attempt's, so whoever recorded it finalized the attempt.
			// Either way nothing was written: the record's owner writes it.
			return Attempt{}, errFenced
		}
		if err != nil {
			return Attempt{}, err
		}
		done := attemptFromRow(sqlc.ChargeAttempt(row))
		done.Charge = paid.Charge
		return done, nil
	}
	var done Attempt
	if len(duplicateIDs) == 0 && a.Input.CheckoutSessionID == uuid.Nil {
		if done, err = record(s.q); err == nil {
			s.announce([]Event{ev})
		}
	} else {
		err = s.inTx(ctx, func(q *txQueries) error {
			if done, err = record(q.Queries); err != nil {
				return err
			}
			q.events = append(q.events, ev)
			if duplicates, err = recordDuplicates(ctx, q, done, duplicateIDs, now); err != nil {
				return err
			}
			if done.Input.CheckoutSessionID == uuid.Nil {
				return nil
			}
			// The session is paid in the same transaction as its charge.
			sess, err := q.PayCheckoutSession(ctx, sqlc.PayCheckoutSessionParams{ChargeID: &chargeID, Now: now, ID: done.Input.CheckoutSessionID})
			if isNotFound(err) {
				return nil // paid already; a session has one live attempt, so by this charge
			}
			if err != nil {
				return err
			}
			return insertEvent(ctx, q, sessionEventOf(EventSessionPaid, sessionFromRow(sess), &done, now))
		})
	}
	if errors.Is(err, errFenced) {
		return Attempt{}, nil, errFenced
	}
	if err != nil {
		return done, nil, interpretError(err)
	}
	return done, duplicates, nil
}

// lateWatch is when the watch of a failed attempt for a late charge reads
// the provider first, and when it ends; zero for no watch.
type lateWatch struct{ first, until time.Time }

// fail finalizes the attempt as FAILED and writes its charge.failed event,
// in one transaction fenced like succeed; with watch, the attempt stays
// watched for a late charge.
func (s *store) fail(ctx context.Context, a Attempt, f Failure, now, expiresAt time.Time, watch lateWatch) (Attempt, error) {
	var done Attempt
	err := s.inTx(ctx, func(q *txQueries) error {
		row, err := q.FailChargeAttempt(ctx, sqlc.FailChargeAttemptParams{
			FailureCode: f.Code, FailureMessage: f.Message, ExpiresAt: expiresAt, ID: a.ID, Attempt: a.Number,
		})
		if isNotFound(err) {
			return errFenced
		}
		if err != nil {
			return err
		}
		done = attemptFromRow(row)
		if !watch.until.IsZero() {
			if err := q.WatchLateCharge(ctx, sqlc.WatchLateChargeParams{FirstCheck: watch.first, WatchUntil: watch.until, ID: done.ID}); err != nil {
				return err
			}
		}
		if done.Kind == KindRefund {
			// A refund that failed gives its reservation back, in the
			// transaction that fails it.
			if err := q.ReleaseRefundReservation(ctx, sqlc.ReleaseRefundReservationParams{Amount: done.Input.Amount, ID: done.RefundOf}); err != nil {
				return err
			}
		}
		return insertEvent(ctx, q, eventOf(done, now))
	})
	if errors.Is(err, errFenced) {
		return Attempt{}, errFenced
	}
	return done, interpretError(err)
}

// await records that a waits for the shopper at url since now (unless it
// waited already; the window ends window after that) with the
// reconciler's next look at nextCheck, fenced on
// a's attempt number; the first time (began), it writes the attempt's
// charge.requires_action in the same transaction.
func (s *store) await(ctx context.Context, a Attempt, url string, now, nextCheck time.Time, window time.Duration) (waiting Attempt, began bool, err error) {
	began = a.ActionSince.IsZero()
	err = s.inTx(ctx, func(q *txQueries) error {
		row, err := q.AwaitChargeAttemptAction(ctx, sqlc.AwaitChargeAttemptActionParams{
			NextActionURL: url, Now: now, NextCheck: nextCheck, ID: a.ID, Attempt: a.Number,
		})
		if isNotFound(err) {
			return errFenced
		}
		if err != nil {
			return err
		}
		waiting = attemptFromRow(row)
		// a's view of whether it waited is exact: the fence let this write
		// through, so no other holder wrote in between.
		if !began {
			return nil
		}
		return insertEvent(ctx, q, actionEventOf(waiting, now, waiting.ActionSince.Add(window)))
	})
	if errors.Is(err, errFenced) {
		return Attempt{}, false, errFenced
	}
	return waiting, began, interpretError(err)
}

// takeActionCheck takes the turn to read the provider about waiting
// attempt a at now, if nobody read it since checkedBefore; ok is false when
// another reader has the turn or a is final. It returns the attempt as it
// is, its attempt number included.
func (s *store) takeActionCheck(ctx context.Context, a Attempt, now, checkedBefore time.Time) (current Attempt, ok bool, err error) {
	row, err := s.q.TakeActionCheck(ctx, sqlc.TakeActionCheckParams{ID: a.ID, Now: now, CheckedBefore: checkedBefore})
	if err = interpretError(err); err == errNotFound {
		return Attempt{}, false, nil
	}
	return attemptFromRow(row), err == nil, err
}

// insertEvent writes e to the outbox, in the caller's transaction, which
// announces it once it commits (inTx). A session's event is the session's
// (its row names no attempt), a merchant's names neither, an attempt's
// the attempt.
func insertEvent(ctx context.Context, q *txQueries, e Event) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	p := sqlc.InsertChargeEventParams{
		ID: e.ID, Type: e.Type, MerchantID: e.MerchantID, IdempotencyKey: e.IdempotencyKey,
		AttemptID: e.AttemptID, Body: body, OccurredAt: e.OccurredAt,
	}
	switch e.Type {
	case EventSessionPaid, EventSessionExpired:
		p.AttemptID, p.CheckoutSessionID = nil, &e.CheckoutSession.ID
	case EventCardTestingSuspected:
		p.AttemptID = nil // the merchant's: it names no attempt and no session
	}
	if err := q.InsertChargeEvent(ctx, p); err != nil {
		return err
	}
	q.events = append(q.events, e)
	return nil
}

// rekey replaces a's provider key with newKey, fenced on a's attempt number
// and its current key; errFenced when a was taken over, finalized, or
// rekeyed by someone else.
func (s *store) rekey(ctx context.Context, a Attempt, newKey string) (Attempt, error) {
	row, err := s.q.RekeyChargeAttempt(ctx, sqlc.RekeyChargeAttemptParams{
		NewProviderKey: newKey, ID: a.ID, Attempt: a.Number, OldProviderKey: a.ProviderKey,
	})
	if isNotFound(err) {
		return Attempt{}, errFenced
	}
	if err != nil {
		return Attempt{}, interpretError(err)
	}
	return attemptFromRow(row), nil
}

// release releases the holder's lease now, fenced on its attempt number.
func (s *store) release(ctx context.Context, a Attempt, now time.Time) error {
	return interpretError(s.q.ReleaseChargeAttempt(ctx, sqlc.ReleaseChargeAttemptParams{Now: now, ID: a.ID, Attempt: a.Number}))
}

// takeStuck takes over up to limit stuck attempts (PROCESSING, their lease
// ended before now), giving each a lease until lockedUntil and a new
// attempt number.
func (s *store) takeStuck(ctx context.Context, now, lockedUntil time.Time, limit int) ([]Attempt, error) {
	rows, err := s.q.TakeStuckChargeAttempts(ctx, sqlc.TakeStuckChargeAttemptsParams{
		LockedUntil: lockedUntil, Now: now, MaxAttempts: int32(limit),
	})
	if err != nil {
		return nil, interpretError(err)
	}
	as := make([]Attempt, len(rows))
	for i, r := range rows {
		as[i] = attemptFromRow(r)
	}
	return as, nil
}

// takeOver takes over a, if it is stuck at now, with a lease until
// lockedUntil and a new attempt number; ok is false when a is final or held.
func (s *store) takeOver(ctx context.Context, a Attempt, now, lockedUntil time.Time) (taken Attempt, ok bool, err error) {
	row, err := s.q.TakeOverChargeAttempt(ctx, sqlc.TakeOverChargeAttemptParams{ID: a.ID, Now: now, LockedUntil: lockedUntil})
	if err = interpretError(err); err == errNotFound {
		return Attempt{}, false, nil
	}
	return attemptFromRow(row), err == nil, err
}

// countStuck counts the attempts stuck at now.
func (s *store) countStuck(ctx context.Context, now time.Time) (int, error) {
	n, err := s.q.CountStuckChargeAttempts(ctx, now)
	return int(n), interpretError(err)
}

// countWaiting counts the attempts that wait for the shopper.
func (s *store) countWaiting(ctx context.Context) (int, error) {
	n, err := s.q.CountWaitingChargeAttempts(ctx)
	return int(n), interpretError(err)
}

func (s *store) orderIsPaid(ctx context.Context, merchantID uuid.UUID, orderID string) (bool, error) {
	paid, err := s.q.OrderIsPaid(ctx, sqlc.OrderIsPaidParams{MerchantID: merchantID, OrderID: &orderID})
	return paid, interpretError(err)
}

// deleteExpired deletes up to limit finished attempts that expired before now.
func (s *store) deleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	n, err := s.q.DeleteExpiredChargeAttempts(ctx, sqlc.DeleteExpiredChargeAttemptsParams{Now: now, MaxAttempts: int32(limit)})
	return int(n), interpretError(err)
}

// deleteSentEvents deletes up to limit outbox events sent before cutoff.
func (s *store) deleteSentEvents(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	n, err := s.q.DeleteSentChargeEvents(ctx, sqlc.DeleteSentChargeEventsParams{Before: cutoff, MaxEvents: int32(limit)})
	return int(n), interpretError(err)
}

// stuck lists up to limit attempts stuck at now, oldest first.
func (s *store) stuck(ctx context.Context, now time.Time, limit int) ([]StuckAttempt, error) {
	rows, err := s.q.ListStuckChargeAttempts(ctx, sqlc.ListStuckChargeAttemptsParams{Now: now, MaxAttempts: int32(limit)})
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]StuckAttempt, len(rows))
	for i, r := range rows {
		out[i] = StuckAttempt{Merchant: r.MerchantName, IdempotencyKey: r.IdempotencyKey, ProviderKey: r.ProviderKey,
			Amount: r.Amount, Currency: r.Currency, Attempt: int(r.Attempt), CreatedAt: r.CreatedAt, LeaseEnded: r.LockedUntil}
	}
	return out, nil
}

// attemptFromRow converts a charge_attempts row; its charge, when it has
// one, is the caller's to attach.
func attemptFromRow(r sqlc.ChargeAttempt) Attempt {
	a := Attempt{
		ID:             r.ID,
		Kind:           Kind(r.Kind),
		MerchantID:     r.MerchantID,
		IdempotencyKey: r.IdempotencyKey,
		Input: ChargeInput{
			Amount: r.Amount, Currency: r.Currency, PaymentMethod: deref(r.PaymentMethod),
			OrderID: deref(r.OrderID), Description: deref(r.Description), ReturnURL: deref(r.ReturnURL),
		},
		Fingerprint: r.Fingerprint,
		Status:      Status(r.Status),
		ProviderKey: r.ProviderKey,
		Number:      r.Attempt,
		LockedUntil: r.LockedUntil,
		CreatedAt:   r.CreatedAt,
		ExpiresAt:   r.ExpiresAt,
	}
	if r.CheckoutSessionID != nil {
		a.Input.CheckoutSessionID = *r.CheckoutSessionID
	}
	a.KeySession = deref(r.KeySessionID)
	if a.Status == StatusFailed {
		a.Failure = &Failure{Code: deref(r.FailureCode), Message: deref(r.FailureMessage)}
	}
	if a.Kind == KindRefund {
		a.RefundOf = deref(r.ChargeID)
		a.PendingSince = deref(r.PendingSince)
	}
	a.LateChargeID = deref(r.LateChargeID)
	if r.NextActionURL != nil {
		a.ActionURL = *r.NextActionURL
		a.ActionSince = deref(r.ActionSince)
		a.ActionCheckedAt = deref(r.ActionCheckedAt)
	}
	return a
}

// chargeOf is the charge that a's success recorded.
func chargeOf(a Attempt, id *uuid.UUID, providerChargeID string, createdAt *time.Time) *Charge {
	c := &Charge{Amount: a.Input.Amount, Currency: a.Input.Currency, OrderID: a.Input.OrderID, ProviderChargeID: providerChargeID}
	if id != nil {
		c.ID = *id
	}
	if createdAt != nil {
		c.CreatedAt = *createdAt
	}
	return c
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optionalID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
