package payment

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
	"chargeonce/history"
	"chargeonce/sqlc"
	"chargeonce/tracing"
)

// The store's charge attempts: the claim, its lookup, the fenced writes that
// finalize it, and the takeovers. Every row is converted to an Attempt here.

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
	return attemptOf(attemptRow{row.ChargeAttempt, row.ProviderChargeID, row.ChargeCreatedAt, refundColumns{row.ProviderRefundID, row.RefundCreatedAt, row.RefundStatus, row.RefundFailureCode, row.RefundFailureMessage}}), nil
}

// getPage loads the newest attempt a checkout page of the merchant made
// under key, among its sessions' keys.
func (s *store) getPage(ctx context.Context, merchantID uuid.UUID, key string) (Attempt, error) {
	row, err := s.q.GetPageChargeAttempt(ctx, sqlc.GetPageChargeAttemptParams{MerchantID: merchantID, IdempotencyKey: key})
	if err != nil {
		return Attempt{}, interpretError(err)
	}
	return attemptOf(attemptRow{row.ChargeAttempt, row.ProviderChargeID, row.ChargeCreatedAt, refundColumns{row.ProviderRefundID, row.RefundCreatedAt, row.RefundStatus, row.RefundFailureCode, row.RefundFailureMessage}}), nil
}

// getByID loads the attempt with id, with its charge or failure.
func (s *store) getByID(ctx context.Context, id uuid.UUID) (Attempt, error) {
	row, err := s.q.GetChargeAttemptByID(ctx, id)
	if err != nil {
		return Attempt{}, interpretError(err)
	}
	return attemptOf(attemptRow{row.ChargeAttempt, row.ProviderChargeID, row.ChargeCreatedAt, refundColumns{row.ProviderRefundID, row.RefundCreatedAt, row.RefundStatus, row.RefundFailureCode, row.RefundFailureMessage}}), nil
}

// fail finalizes the attempt as FAILED, fenced on a's fence, and runs
// then, which writes what the failure means to a's kind (its event
// included), in the same transaction.
func (s *store) fail(ctx context.Context, a Attempt, f Failure, now, expiresAt time.Time, then func(q *txQueries, done Attempt) error) (Attempt, error) {
	var done Attempt
	err := s.inTx(ctx, func(q *txQueries) error {
		row, err := q.FailChargeAttempt(ctx, sqlc.FailChargeAttemptParams{
			FailureCode: f.Code, FailureMessage: f.Message, Now: now, ExpiresAt: expiresAt, ID: a.ID, Fence: a.Fence,
		})
		if isNotFound(err) {
			return errFenced
		}
		if err != nil {
			return err
		}
		done = attemptFromRow(row)
		return then(q, done)
	})
	if errors.Is(err, errFenced) {
		return Attempt{}, errFenced
	}
	return done, interpretError(err)
}

// await records that a waits for the shopper at url since now (unless it
// waited already; the window ends window after that) with the
// reconciler's next look at nextCheck, fenced on
// a's fence; the first time (began), it writes the attempt's
// charge.requires_action in the same transaction.
func (s *store) await(ctx context.Context, a Attempt, url string, now, nextCheck time.Time, window time.Duration) (waiting Attempt, began bool, err error) {
	began = a.Wait.Since.IsZero()
	err = s.inTx(ctx, func(q *txQueries) error {
		row, err := q.AwaitChargeAttemptAction(ctx, sqlc.AwaitChargeAttemptActionParams{
			NextActionURL: url, Now: now, NextCheck: nextCheck, ID: a.ID, Fence: a.Fence,
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
		return insertEvent(ctx, q, actionEventOf(waiting, now, waiting.Wait.Since.Add(window)))
	})
	if errors.Is(err, errFenced) {
		return Attempt{}, false, errFenced
	}
	return waiting, began, interpretError(err)
}

// takeActionCheck takes the turn to read the provider about waiting
// attempt a at now, if nobody read it since checkedBefore; ok is false when
// another reader has the turn or a is final. It returns the attempt as it
// is, its fence included.
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
//
// The event names the request that caused it (Event.Request), and carries
// its writer's trace context to the outbox row, for the relay's span and
// the webhooks' traceparent.
func insertEvent(ctx context.Context, q *txQueries, e Event) error {
	e = e.causedBy(ctx)
	p := sqlc.InsertChargeEventParams{
		ID: e.ID, Type: e.Type, MerchantID: e.MerchantID, IdempotencyKey: e.IdempotencyKey,
		AttemptID: e.AttemptID, OccurredAt: e.OccurredAt,
	}
	p.Traceparent, p.Tracestate = tracing.Traceparent(ctx)
	switch e.Type {
	case EventSessionPaid, EventSessionExpired:
		p.AttemptID, p.CheckoutSessionID = nil, &e.CheckoutSession.ID
	case EventCardTestingSuspected:
		p.AttemptID = nil // the merchant's: it names no attempt and no session
	}
	body, err := e.storedBody(p.AttemptID != nil, false)
	if err != nil {
		return err
	}
	p.Body = body
	if err := q.InsertChargeEvent(ctx, p); err != nil {
		return err
	}
	q.events = append(q.events, e)
	return nil
}

// rekey replaces a's provider key with newKey, fenced on a's fence
// and its current key; errFenced when a was taken over, finalized, or
// rekeyed by someone else.
func (s *store) rekey(ctx context.Context, a Attempt, newKey string) (Attempt, error) {
	row, err := s.q.RekeyChargeAttempt(ctx, sqlc.RekeyChargeAttemptParams{
		NewProviderKey: newKey, ID: a.ID, Fence: a.Fence, OldProviderKey: a.ProviderKey,
	})
	if isNotFound(err) {
		return Attempt{}, errFenced
	}
	if err != nil {
		return Attempt{}, interpretError(err)
	}
	return attemptFromRow(row), nil
}

// release releases the holder's lease now, fenced on a's fence; released
// is false when someone else holds a. Its history rows, notes, ride with it.
func (s *store) release(ctx context.Context, a Attempt, now time.Time, notes []history.Entry) (released bool, err error) {
	h := argsOf(notes)
	n, err := s.q.ReleaseChargeAttempt(ctx, sqlc.ReleaseChargeAttemptParams{Now: now, ID: a.ID, Fence: a.Fence,
		HAt: h.at, HEntries: h.entries,
		HRequestID: h.src.RequestID, HTraceID: h.src.TraceID, HSpanID: h.src.SpanID, HInstance: h.src.Instance})
	return n > 0, interpretError(err)
}

// takeStuck takes over up to limit stuck attempts (PROCESSING, their lease
// ended before now), giving each a lease until lockedUntil and a new
// fence.
func (s *store) takeStuck(ctx context.Context, now, lockedUntil time.Time, limit int) ([]Attempt, error) {
	src := s.hist.Source(ctx)
	rows, err := s.q.TakeStuckChargeAttempts(ctx, sqlc.TakeStuckChargeAttemptsParams{
		LockedUntil: lockedUntil, Now: now, MaxAttempts: int32(limit),
		HRequestID: src.RequestID, HTraceID: src.TraceID, HSpanID: src.SpanID, HInstance: src.Instance,
	})
	if err != nil {
		return nil, interpretError(err)
	}
	as := make([]Attempt, len(rows))
	for i, r := range rows {
		as[i] = attemptFromRow(sqlc.ChargeAttempt(r))
	}
	return as, nil
}

// takeOver takes over a, if it is stuck at now, with a lease until
// lockedUntil and a new fence; ok is false when a is final or held.
func (s *store) takeOver(ctx context.Context, a Attempt, now, lockedUntil time.Time) (taken Attempt, ok bool, err error) {
	src := s.hist.Source(ctx)
	row, err := s.q.TakeOverChargeAttempt(ctx, sqlc.TakeOverChargeAttemptParams{ID: a.ID, Now: now, LockedUntil: lockedUntil,
		HRequestID: src.RequestID, HTraceID: src.TraceID, HSpanID: src.SpanID, HInstance: src.Instance})
	if err = interpretError(err); err == errNotFound {
		return Attempt{}, false, nil
	}
	return attemptFromRow(sqlc.ChargeAttempt(row)), err == nil, err
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

// deleteExpired deletes up to limit finished attempts that expired before
// now, which were all made before now less retention (their ids are below
// that time's floor).
func (s *store) deleteExpired(ctx context.Context, now time.Time, retention time.Duration, limit int) (int, error) {
	n, err := s.q.DeleteExpiredChargeAttempts(ctx, sqlc.DeleteExpiredChargeAttemptsParams{
		BeforeID: idFloor(now.Add(-retention)), Now: now, MaxAttempts: int32(limit),
	})
	return int(n), interpretError(err)
}

// deleteSentEvents deletes up to limit outbox events sent before cutoff
// (and so written before it: their ids are below cutoff's floor).
func (s *store) deleteSentEvents(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	n, err := s.q.DeleteSentChargeEvents(ctx, sqlc.DeleteSentChargeEventsParams{
		BeforeID: idFloor(cutoff), Before: cutoff, MaxEvents: int32(limit),
	})
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
		out[i] = StuckAttempt{Merchant: r.MerchantName, IdempotencyKey: r.IdempotencyKey, ProviderKey: providerKeyOf(r.ID, r.ProviderKey),
			Amount: r.Amount, Currency: r.Currency, Holders: int(r.Fence), CreatedAt: r.CreatedAt, LeaseEnded: r.LockedUntil}
	}
	return out, nil
}

// storedProviderKey is provider key key of attempt id as its row keeps
// it: NULL for the first (firstProviderKey), which the row's id gives.
func storedProviderKey(id uuid.UUID, key string) *string {
	if key == firstProviderKey(id) {
		return nil
	}
	return &key
}

// providerKeyOf is the provider key of attempt id whose row keeps stored.
func providerKeyOf(id uuid.UUID, stored *string) string {
	if stored == nil {
		return firstProviderKey(id)
	}
	return *stored
}

// attemptRow is a stored attempt as a read carries it: its row, and the
// columns of what it made (a charge's, a refund's), when the read joins
// them.
type attemptRow struct {
	sqlc.ChargeAttempt
	providerChargeID *string
	chargeCreatedAt  *time.Time
	refund           refundColumns
}

// termsFromRow are the registered kinds' conversions of a row to their
// terms, each in its kind's store file.
var termsFromRow = map[Kind]func(attemptRow) Terms{}

// attemptFromRow converts a charge_attempts row read without the columns
// of what it made.
func attemptFromRow(r sqlc.ChargeAttempt) Attempt { return attemptOf(attemptRow{ChargeAttempt: r}) }

// attemptOf converts a stored attempt: what every kind has here, its terms
// by its kind.
func attemptOf(row attemptRow) Attempt {
	r := row.ChargeAttempt
	a := Attempt{
		ID:             r.ID,
		Kind:           Kind(r.Kind),
		MerchantID:     r.MerchantID,
		IdempotencyKey: r.IdempotencyKey,
		KeySession:     deref(r.KeySessionID),
		Fingerprint:    r.Fingerprint,
		Status:         Status(r.Status),
		ProviderKey:    providerKeyOf(r.ID, r.ProviderKey),
		Fence:          r.Fence,
		LockedUntil:    r.LockedUntil,
		CreatedAt:      r.CreatedAt,
		ExpiresAt:      r.ExpiresAt,
		PendingSince:   deref(r.PendingSince),
		LateChargeID:   deref(r.LateChargeID),
	}
	if a.Status == StatusFailed {
		a.Failure = &Failure{Code: deref(r.FailureCode), Message: deref(r.FailureMessage)}
	}
	if r.NextActionURL != nil {
		a.Wait = ShopperWait{URL: *r.NextActionURL, Since: deref(r.ActionSince), CheckedAt: deref(r.ActionCheckedAt)}
	}
	if terms, ok := termsFromRow[a.Kind]; ok {
		a.Terms = terms(row)
	}
	return a
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
