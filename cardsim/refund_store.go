package cardsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"chargeonce/cardsim/internal/sqlc"
)

// statusPending is a refund's status until it settles; a refund is
// otherwise succeeded or failed, as a charge.
const statusPending = "pending"

var errNoRefund = errors.New("no such refund")

// refund is a stored refund, as the handlers see it.
type refund struct {
	ID             string
	ChargeID       string
	IdempotencyKey string
	Amount         int64
	Currency       string
	Reason         *string
	Status         string
	FailureCode    *string
	FailureMessage *string
	Metadata       map[string]string
	Created        time.Time
	SettlesAt      time.Time
}

// refusal is a refund, capture or void that the simulator refuses, as
// Stripe does with a 400: nothing is stored, and the same request later is
// decided anew.
type refusal struct {
	code, message string
}

func (r *refusal) Error() string { return "refused: " + r.code }

// createRefund stores the refund of key, or finds the one stored by an
// earlier request with that key (replayed is then true). A refund that
// would take more than remains of its charge is a *refusal: the charge's
// row lock makes its refunds decide one at a time, so that no interleaving
// refunds more than was charged. A pending refund settles after settle.
func (s *store) createRefund(ctx context.Context, key string, req refundRequest, settle time.Duration) (r refund, replayed bool, err error) {
	metadata, err := json.Marshal(req.Metadata)
	if err != nil {
		return r, false, err
	}
	hash := refundHash(req)
	// First, so that a refund that failed meanwhile gives its amount back.
	if err := s.settleDue(ctx); err != nil {
		return r, false, err
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		// The lock first: a request with the same key and charge that
		// committed while this one waited for it is then seen, and replayed.
		c, lockErr := q.LockRefundedCharge(ctx, req.Charge)
		if lockErr != nil && !errors.Is(lockErr, pgx.ErrNoRows) {
			return fmt.Errorf("lock charge: %w", lockErr)
		}
		stored, err := q.GetRefundByIdempotencyKey(ctx, key)
		if err == nil {
			r, replayed, err = replay(stored, stored.RequestHash, hash, refundFromRow)
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("load refund of key: %w", err)
		}
		if lockErr != nil {
			return &refusal{"resource_missing", fmt.Sprintf("No such charge: %q.", req.Charge)}
		}
		if c.Status != statusSucceeded {
			return &refusal{codeChargeNotRefundable, fmt.Sprintf(
				"This charge's status is %s: only a charge that is %s can be refunded.", c.Status, statusSucceeded)}
		}
		// Of an authorization, only what its captures took was charged.
		refundable := c.Amount
		if c.CaptureMethod == captureManual {
			refundable = c.AmountCaptured
		}
		if refundable == 0 {
			return &refusal{codeChargeNotRefundable,
				"Nothing of this authorization was captured: there is nothing to refund."}
		}
		held, err := q.RefundsHeld(ctx, c.ID)
		if err != nil {
			return fmt.Errorf("sum refunds: %w", err)
		}
		remaining := refundable - held.Held
		amount := req.Amount
		switch {
		case amount == 0 && remaining == 0:
			return &refusal{codeChargeAlreadyRefunded, "This charge has already been refunded in full."}
		case amount == 0:
			amount = remaining
		case amount > remaining:
			return &refusal{codeAmountTooLarge, fmt.Sprintf("The refund of %s is greater than what remains of the charge, %s.",
				formatAmount(amount, c.Currency), formatAmount(remaining, c.Currency))}
		}
		later, settlesTo := tokens[c.PaymentMethod].refundOutcome(held.Made == 0)
		params := sqlc.InsertRefundParams{
			ID: newID("re_"), ChargeID: c.ID, IdempotencyKey: key, RequestHash: hash,
			Amount: amount, Currency: c.Currency, Reason: req.Reason, Status: settlesTo, Metadata: metadata,
			SettleAfter: pgtype.Interval{Valid: true}, SettlesTo: settlesTo,
		}
		if later {
			params.Status = statusPending
			params.SettleAfter.Microseconds = settle.Microseconds()
		}
		row, err := q.InsertRefund(ctx, params)
		if errors.Is(err, pgx.ErrNoRows) {
			// The key was taken meanwhile, by a request for another charge
			// that committed: this statement sees it.
			if stored, err = q.GetRefundByIdempotencyKey(ctx, key); err != nil {
				return fmt.Errorf("load refund of reused key: %w", err)
			}
			r, replayed, err = replay(stored, stored.RequestHash, hash, refundFromRow)
			return err
		}
		if err != nil {
			return fmt.Errorf("insert refund: %w", err)
		}
		r, err = refundFromRow(row)
		return err
	})
	return r, replayed, err
}

// replay answers a request with hash whose key a stored row holds (a
// refund's, a capture's, a void's): with what from makes of the row, if
// storedHash says it is the same request; else errKeyReused.
func replay[R, T any](stored R, storedHash, hash []byte, from func(R) (T, error)) (T, bool, error) {
	if !bytes.Equal(storedHash, hash) {
		var zero T
		return zero, false, errKeyReused
	}
	v, err := from(stored)
	return v, true, err
}

// getRefund returns the refund with id as it is now, or errNoRefund.
func (s *store) getRefund(ctx context.Context, id string) (refund, error) {
	if err := s.settleDue(ctx); err != nil {
		return refund{}, err
	}
	row, err := s.queries.GetRefund(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return refund{}, errNoRefund
	}
	if err != nil {
		return refund{}, err
	}
	return refundFromRow(row)
}

// listRefunds returns the refunds that f selects as they are now, newest
// first, at most f.Limit of them, and whether more follow. A page after a
// refund that does not exist is errNoRefund.
func (s *store) listRefunds(ctx context.Context, f refundFilter) (refunds []refund, more bool, err error) {
	if err := s.settleDue(ctx); err != nil {
		return nil, false, err
	}
	if f.StartingAfter != nil {
		if _, err := s.queries.GetRefund(ctx, *f.StartingAfter); errors.Is(err, pgx.ErrNoRows) {
			return nil, false, errNoRefund
		} else if err != nil {
			return nil, false, err
		}
	}
	rows, err := s.queries.ListRefunds(ctx, sqlc.ListRefundsParams{
		ChargeID:       f.Charge,
		IdempotencyKey: f.IdempotencyKey,
		Merchant:       f.Merchant,
		Status:         f.Status,
		StartingAfter:  f.StartingAfter,
		RowLimit:       f.Limit + 1,
	})
	if err != nil {
		return nil, false, err
	}
	return pageOf(rows, f.Limit, refundFromRow)
}

// failRefund fails refund id, pending or succeeded, with
// expired_or_canceled_card. failed is false when it had failed already: it
// is returned as it is, and nothing changed.
func (s *store) failRefund(ctx context.Context, id string) (r refund, failed bool, err error) {
	if err := s.settleDue(ctx); err != nil {
		return r, false, err
	}
	row, err := s.queries.FailRefund(ctx, sqlc.FailRefundParams{
		ID: id, FailureCode: codeExpiredOrCanceledCard, FailureMessage: messageExpiredOrCanceledCard,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		r, err = s.getRefund(ctx, id)
		return r, false, err
	}
	if err != nil {
		return r, false, fmt.Errorf("fail refund %s: %w", id, err)
	}
	r, err = refundFromRow(row)
	return r, true, err
}

// settleDue makes final what time has decided, as every read of refunds or
// charges does first, with no loop in the background: every pending refund
// whose time has come settles, and every open authorization whose window
// has passed expires.
func (s *store) settleDue(ctx context.Context) error {
	err := s.queries.SettleDueRefunds(ctx, sqlc.SettleDueRefundsParams{
		FailureCode: codeExpiredOrCanceledCard, FailureMessage: messageExpiredOrCanceledCard,
	})
	if err != nil {
		return fmt.Errorf("settle refunds: %w", err)
	}
	if err := s.queries.ExpireDueAuthorizations(ctx); err != nil {
		return fmt.Errorf("expire authorizations: %w", err)
	}
	return nil
}

func refundFromRow(row sqlc.CardsimRefund) (refund, error) {
	metadata := map[string]string{}
	if err := json.Unmarshal(row.Metadata, &metadata); err != nil {
		return refund{}, fmt.Errorf("decode metadata of refund %s: %w", row.ID, err)
	}
	return refund{
		ID:             row.ID,
		ChargeID:       row.ChargeID,
		IdempotencyKey: row.IdempotencyKey,
		Amount:         row.Amount,
		Currency:       row.Currency,
		Reason:         row.Reason,
		Status:         row.Status,
		FailureCode:    row.FailureCode,
		FailureMessage: row.FailureMessage,
		Metadata:       metadata,
		Created:        row.CreatedAt,
		SettlesAt:      row.SettlesAt,
	}, nil
}
