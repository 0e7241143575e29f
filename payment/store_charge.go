package payment

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"chargeonce/history"
	"chargeonce/sqlc"
	"chargeonce/tracing"
)

// The store's charge attempts: the claim of a key for a charge, the
// fenced writes that record its charge or its failure, and the conversion
// of its row.

func init() { termsFromRow[KindCharge] = chargeTermsFromRow }

// chargeTermsFromRow are the terms of a charge attempt's row, with its
// charge when it SUCCEEDED.
func chargeTermsFromRow(row attemptRow) Terms {
	r := row.ChargeAttempt
	t := ChargeTerms{Input: ChargeInput{
		Amount: r.Amount, Currency: r.Currency, PaymentMethod: deref(r.PaymentMethod),
		OrderID: deref(r.OrderID), Description: deref(r.Description), ReturnURL: deref(r.ReturnURL),
		CheckoutSessionID: deref(r.CheckoutSessionID), CaptureMethod: CaptureMethod(deref(r.CaptureMethod)),
	}}
	if Status(r.Status) == StatusSucceeded {
		t.Charge = chargeTermsCharge(t.Input, r.ChargeID, deref(row.providerChargeID), row.chargeCreatedAt)
	}
	return t
}

// claim inserts a, and when the merchant's key was claimed already reads
// the stored attempt in the same statement, so that a replay costs one round
// trip: claimedByUs with a as inserted, foundStored with the stored attempt
// and its charge, or notVisibleYet when there was none to read (the key was
// claimed a moment after the statement's snapshot, or the order is paid).
// An attempt on a checkout session is inserted only while the session takes
// it (open, unexpired at a.CreatedAt, below maxSessionAttempts), which it
// counts. The claim takes its connection first, so that a failure to get
// one (the database is away, or the pool is exhausted) is known to have
// sent nothing (acquire). A claim off a checkout session goes in one
// statement with the claims of the requests beside it (claims).
func (s *store) claim(ctx context.Context, a Attempt, maxSessionAttempts int) (claim, error) {
	in := a.charge().Input
	src := claimSource(ctx, s.hist)
	arg := sqlc.ClaimChargeAttemptParams{
		ClaimRequestID:     src.RequestID,
		ClaimInstance:      src.Instance,
		ClaimSource:        src.Rest,
		ID:                 a.ID,
		MerchantID:         a.MerchantID,
		IdempotencyKey:     a.IdempotencyKey,
		Fingerprint:        a.Fingerprint,
		ProviderKey:        storedProviderKey(a.ID, a.ProviderKey),
		Amount:             in.Amount,
		Currency:           in.Currency,
		PaymentMethod:      optional(in.PaymentMethod),
		OrderID:            optional(in.OrderID),
		Description:        optional(in.Description),
		LockedUntil:        a.LockedUntil,
		ExpiresAt:          a.ExpiresAt,
		CheckoutSessionID:  optionalID(in.CheckoutSessionID),
		ReturnURL:          optional(in.ReturnURL),
		KeySessionID:       optionalID(a.KeySession),
		CaptureMethod:      optional(manual(in.CaptureMethod)),
		Now:                a.CreatedAt,
		MaxSessionAttempts: int32(maxSessionAttempts),
	}
	// A claim off a checkout session is made with those made beside it
	// (claims); one on a session counts an attempt of it, alone.
	var row *sqlc.ClaimChargeAttemptRow
	var err error
	if in.CheckoutSessionID == uuid.Nil {
		row, err = s.claims.write(ctx, arg)
	} else {
		row, err = s.claimAlone(ctx, arg)
	}
	if err != nil {
		return claim{}, interpretError(err)
	}
	if row == nil {
		return claim{outcome: notVisibleYet}, nil
	}
	c := claim{outcome: foundStored, attempt: attemptOf(attemptRow{row.ChargeAttempt, row.ProviderChargeID, row.ChargeCreatedAt, refundColumns{row.ProviderRefundID, row.RefundCreatedAt, row.RefundStatus, row.RefundFailureCode, row.RefundFailureMessage}})}
	if row.Claimed {
		c.outcome = claimedByUs
	}
	return c, nil
}

// claimAlone claims one key on a connection of its own, taken first
// (acquire).
func (s *store) claimAlone(ctx context.Context, arg sqlc.ClaimChargeAttemptParams) (*sqlc.ClaimChargeAttemptRow, error) {
	conn, err := acquire(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	return claimOne(ctx, conn, arg)
}

// succeed records the provider's charge providerChargeID, finalizes the attempt and writes its
// charge.succeeded event to the outbox, fenced on a's fence, with the
// provider charges detail.duplicates of it, if any, which it returns; now is when the event
// occurred, and when the charge was recorded. A plain charge is one
// statement (RecordChargeSucceeded), committed on its own, or with the
// plain charges recorded beside it (RecordChargesSucceeded, recordings):
// one round trip where a transaction of its three writes took five.
// Duplicates and a checkout session to mark paid join it in one
// transaction.
//
// A manual charge's charge records its authorization (authorizedUntil: when
// it lapses) and writes charge.authorized beside charge.succeeded, in one
// transaction.
func (s *store) succeed(ctx context.Context, a Attempt, providerChargeID string, detail chargeDetail, authorizedUntil *time.Time, now, expiresAt time.Time) (_ Attempt, duplicates []Charge, _ error) {
	duplicateIDs, in := detail.duplicates, a.charge().Input
	// PostgreSQL keeps microseconds: the first answer says what a replay
	// will read back.
	now = now.Truncate(time.Microsecond)
	chargeID := newID()
	charge := chargeOf(a, &chargeID, providerChargeID, &now)
	paid := a.withCharge(charge)
	ev := chargeEventOf(paid, now).causedBy(ctx)
	body, err := ev.storedBody(true, true) // the attempt's row is the event's, and the charge's holds the rest
	traceparent, tracestate := tracing.Traceparent(ctx)
	if err != nil {
		return Attempt{}, nil, err
	}
	arg := sqlc.RecordChargeSucceededParams{
		ChargeID: chargeID, Now: now, ExpiresAt: expiresAt, ID: a.ID, Fence: a.Fence,
		ProviderChargeID: providerChargeID, EventID: ev.ID, EventBody: body, AuthorizationExpiresAt: authorizedUntil,
		Traceparent: traceparent, Tracestate: tracestate,
	}
	if id, inRow := ev.requestUUID(); inRow {
		arg.EventRequestID = &id
	}
	// recorded is the attempt as a recording left it (row), or errFenced
	// when it wrote nothing (recordOne).
	recorded := func(row *sqlc.ChargeAttempt, err error) (Attempt, error) {
		if err != nil {
			return Attempt{}, err
		}
		if row == nil {
			return Attempt{}, errFenced
		}
		return attemptFromRow(*row).withCharge(charge), nil
	}
	var done Attempt
	// History rows to write with it (a takeover's finalization) join it in
	// a transaction too, which writes them (inTx): a fresh charge has none.
	ride := ridingOf(ctx)
	if len(duplicateIDs) == 0 && in.CheckoutSessionID == uuid.Nil && authorizedUntil == nil && (ride == nil || len(ride.entries) == 0) {
		// A plain charge: its recording is written with those of the
		// charges recorded beside it (recordings).
		if done, err = recorded(s.recordings.write(ctx, arg)); err == nil {
			s.announce([]Event{ev})
		}
	} else {
		err = s.inTx(ctx, func(q *txQueries) error {
			if done, err = recorded(recordOne(ctx, q.Queries, arg)); err != nil {
				return err
			}
			q.events = append(q.events, ev)
			if authorizedUntil != nil {
				if err := insertEvent(ctx, q, authorizationEventOf(EventChargeAuthorized, done, *authorizedUntil, now)); err != nil {
					return err
				}
			}
			if duplicates, err = recordDuplicates(ctx, q, done, duplicateIDs, now); err != nil {
				return err
			}
			if in.CheckoutSessionID == uuid.Nil {
				return nil
			}
			// The session is paid in the same transaction as its charge.
			sess, err := q.PayCheckoutSession(ctx, sqlc.PayCheckoutSessionParams{ChargeID: &chargeID, Now: now, ID: in.CheckoutSessionID})
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

// failCharge finalizes the charge attempt as FAILED and writes its
// charge.failed event, in one transaction fenced like succeed; with watch,
// the attempt stays watched for a late charge.
func (s *store) failCharge(ctx context.Context, a Attempt, f Failure, now, expiresAt time.Time, watch lateWatch) (Attempt, error) {
	return s.fail(ctx, a, f, now, expiresAt, func(q *txQueries, done Attempt) error {
		if !watch.until.IsZero() {
			if err := q.WatchLateCharge(ctx, sqlc.WatchLateChargeParams{FirstCheck: watch.first, WatchUntil: watch.until, ID: done.ID}); err != nil {
				return err
			}
		}
		return insertEvent(ctx, q, chargeEventOf(done, now))
	})
}

func (s *store) orderIsPaid(ctx context.Context, merchantID uuid.UUID, orderID string) (bool, error) {
	paid, err := s.q.OrderIsPaid(ctx, sqlc.OrderIsPaidParams{MerchantID: merchantID, OrderID: &orderID})
	return paid, interpretError(err)
}

// chargeOf is the charge that charge attempt a's success recorded.
func chargeOf(a Attempt, id *uuid.UUID, providerChargeID string, createdAt *time.Time) *Charge {
	return chargeTermsCharge(a.charge().Input, id, providerChargeID, createdAt)
}

// chargeTermsCharge is the charge of in that a success recorded.
func chargeTermsCharge(in ChargeInput, id *uuid.UUID, providerChargeID string, createdAt *time.Time) *Charge {
	c := &Charge{Amount: in.Amount, Currency: in.Currency, OrderID: in.OrderID, ProviderChargeID: providerChargeID}
	if id != nil {
		c.ID = *id
	}
	if createdAt != nil {
		c.CreatedAt = *createdAt
	}
	return c
}

// claimSource is who claims an attempt (ctx's request and trace, rec's
// instance), as the claim writes it on the attempt's row: written before
// anything is sent, so that it outlives a holder that dies with it. The
// history reads the claim from it, and the send it allows (provider.sent,
// holder 1, under the attempt's provider key) from the rest of the row
// (history.List). It goes in three columns (history.SourceColumns).
func claimSource(ctx context.Context, rec *history.Recorder) history.SourceColumns {
	return history.ColumnsOf(rec.Source(ctx))
}
