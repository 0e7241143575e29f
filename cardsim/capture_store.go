package cardsim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"chargeonce/cardsim/internal/sqlc"
)

var (
	errNoCapture = errors.New("no such capture")
	errNoVoid    = errors.New("no such void")
)

// capture is a stored capture, as the handlers see it.
type capture struct {
	ID             string
	ChargeID       string
	IdempotencyKey string
	Amount         int64
	Currency       string
	Final          bool
	Status         string // succeeded, or failed when the card declined it
	FailureCode    *string
	FailureMessage *string
	Metadata       map[string]string
	Created        time.Time
}

// void is a stored void, as the handlers see it: one that was made.
type void struct {
	ID             string
	ChargeID       string
	IdempotencyKey string
	Metadata       map[string]string
	Created        time.Time
}

// amounts are what c authorized, captured, still holds capturable, and
// released by a void, as its wire form shows them.
func (c charge) amounts() (authorized, captured, capturable, voided int64) {
	if c.Status != statusSucceeded {
		return 0, 0, 0, 0
	}
	if c.AuthorizationStatus == nil { // automatic: captured with the charge
		return c.Amount, c.Amount, 0, 0
	}
	switch *c.AuthorizationStatus {
	case authorizationOpen:
		return c.Amount, c.AmountCaptured, c.Amount - c.AmountCaptured, 0
	case authorizationVoided:
		return c.Amount, 0, 0, c.Amount
	default:
		return c.Amount, c.AmountCaptured, 0, 0
	}
}

// createCapture stores the capture of key, or finds the one stored by an
// earlier request with that key (replayed is then true). A capture that
// the authorization refuses is a *refusal, and nothing is stored. The
// charge's row lock makes its captures, void and expiry decide one at a
// time, and the update that takes the amount guards it again: no
// interleaving captures more than was authorized, or both captures and
// expires (or voids) one authorization.
func (s *store) createCapture(ctx context.Context, key string, req captureRequest) (capture, bool, error) {
	metadata, err := json.Marshal(req.Metadata)
	if err != nil {
		return capture{}, false, err
	}
	hash := captureHash(req)
	return decideOnce(ctx, s, key, req.Charge, hash, captures,
		func(q *sqlc.Queries, c sqlc.Charge, lapsed bool) (sqlc.CardsimCapture, error) {
			if req.Currency != nil && *req.Currency != c.Currency {
				return sqlc.CardsimCapture{}, &refusal{"currency_mismatch",
					fmt.Sprintf("The capture's currency, %s, is not the charge's, %s.", *req.Currency, c.Currency)}
			}
			if refused := authorizationRefuses(c, lapsed, "captured"); refused != nil {
				return sqlc.CardsimCapture{}, refused
			}
			remaining := c.Amount - c.AmountCaptured
			amount := cmp.Or(req.Amount, remaining)
			if amount > remaining {
				return sqlc.CardsimCapture{}, &refusal{codeCaptureExceedsAuthorization, fmt.Sprintf(
					"The capture of %s is greater than what remains capturable of the authorization, %s.",
					formatAmount(amount, c.Currency), formatAmount(remaining, c.Currency))}
			}
			params := sqlc.InsertCaptureParams{
				ID: newID("cp_"), ChargeID: c.ID, IdempotencyKey: key, RequestHash: hash,
				Amount: amount, Currency: c.Currency, Final: req.Final, Status: statusSucceeded, Metadata: metadata,
			}
			declined := tokens[c.PaymentMethod].captures == capturesDeclined
			if declined {
				params.Status = statusFailed
				params.FailureCode, params.FailureMessage = new(codeCaptureDeclined), new(messageCaptureDeclined)
			}
			row, err := claimed(q.InsertCapture(ctx, params))
			if err != nil || declined {
				return row, err
			}
			_, err = q.CaptureAuthorization(ctx, sqlc.CaptureAuthorizationParams{ID: c.ID, Amount: amount, Final: req.Final})
			return row, err
		})
}

// createVoid stores the void of key, or finds the one stored by an earlier
// request with that key (replayed is then true); as createCapture.
func (s *store) createVoid(ctx context.Context, key string, req voidRequest) (void, bool, error) {
	metadata, err := json.Marshal(req.Metadata)
	if err != nil {
		return void{}, false, err
	}
	hash := voidHash(req)
	return decideOnce(ctx, s, key, req.Charge, hash, voids,
		func(q *sqlc.Queries, c sqlc.Charge, lapsed bool) (sqlc.CardsimVoid, error) {
			if refused := authorizationRefuses(c, lapsed, "voided"); refused != nil {
				return sqlc.CardsimVoid{}, refused
			}
			row, err := claimed(q.InsertVoid(ctx, sqlc.InsertVoidParams{
				ID: newID("vd_"), ChargeID: c.ID, IdempotencyKey: key, RequestHash: hash, Metadata: metadata,
			}))
			if err != nil {
				return row, err
			}
			_, err = q.VoidAuthorization(ctx, c.ID)
			return row, err
		})
}

// kept is what decideOnce needs of a kind of request that is stored once
// per key (a capture, a void): its name, how to load the row of a key,
// the row's request hash, and what the handlers see of the row.
type kept[R, T any] struct {
	name    string
	byKey   func(*sqlc.Queries, context.Context, string) (R, error)
	hashOf  func(R) []byte
	fromRow func(R) (T, error)
}

var (
	captures = kept[sqlc.CardsimCapture, capture]{"capture", (*sqlc.Queries).GetCaptureByIdempotencyKey,
		func(r sqlc.CardsimCapture) []byte { return r.RequestHash }, captureFromRow}
	voids = kept[sqlc.CardsimVoid, void]{"void", (*sqlc.Queries).GetVoidByIdempotencyKey,
		func(r sqlc.CardsimVoid) []byte { return r.RequestHash }, voidFromRow}
)

// errKeyTaken is an insert that found its idempotency key taken.
var errKeyTaken = errors.New("idempotency key taken")

// claimed is an insert's answer, with no row (its key taken) as
// errKeyTaken, apart from no row of any other statement.
func claimed[R any](row R, err error) (R, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return row, errKeyTaken
	}
	return row, err
}

// decideOnce decides the request of key (whose hash is hash) of the
// authorization chargeID, in a transaction that holds the charge's row
// lock: a request whose key is stored is answered with its row
// (errKeyReused if it was another request); else decide, given the locked
// charge, refuses (a *refusal) or stores the row and changes the charge.
// decide's insert finding the key taken (errKeyTaken, see claimed) means a
// request for another charge took it meanwhile: that one is replayed. Any
// other error of decide's, even no row from its update, stores nothing.
func decideOnce[R, T any](ctx context.Context, s *store, key, chargeID string, hash []byte, kind kept[R, T],
	decide func(q *sqlc.Queries, c sqlc.Charge, lapsed bool) (R, error),
) (v T, replayed bool, err error) {
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		q := s.queries.WithTx(tx)
		// The lock first: a request with the same key and charge that
		// committed while this one waited for it is then seen, and replayed.
		locked, lockErr := q.LockAuthorization(ctx, chargeID)
		if lockErr != nil && !errors.Is(lockErr, pgx.ErrNoRows) {
			return fmt.Errorf("lock charge: %w", lockErr)
		}
		stored, err := kind.byKey(q, ctx, key)
		if err == nil {
			v, replayed, err = replay(stored, kind.hashOf(stored), hash, kind.fromRow)
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("load %s of key: %w", kind.name, err)
		}
		if lockErr != nil {
			return &refusal{"resource_missing", fmt.Sprintf("No such charge: %q.", chargeID)}
		}
		row, err := decide(q, locked.Charge, locked.Lapsed)
		var refused *refusal
		switch {
		case errors.Is(err, errKeyTaken):
			// This statement sees the request that took it.
			if stored, err = kind.byKey(q, ctx, key); err != nil {
				return fmt.Errorf("load %s of taken key: %w", kind.name, err)
			}
			v, replayed, err = replay(stored, kind.hashOf(stored), hash, kind.fromRow)
			return err
		case errors.As(err, &refused):
			return err
		case err != nil:
			// Under the lock, after decide's checks, the update's guard
			// cannot refuse: if it does, nothing is stored.
			return fmt.Errorf("%s of %s: %w", kind.name, chargeID, err)
		}
		v, err = kind.fromRow(row)
		return err
	})
	return v, replayed, err
}

// authorizationRefuses is the refusal of a capture or void (done says
// which: "captured" or "voided") of c, locked, whose open authorization
// has lapsed when lapsed; nil when c's authorization is open. A capture
// checks the amount besides.
func authorizationRefuses(c sqlc.Charge, lapsed bool, done string) *refusal {
	if c.CaptureMethod != captureManual || c.Status != statusSucceeded {
		return &refusal{codeChargeNotCapturable, fmt.Sprintf(
			"This charge is no authorization (capture_method %s, status %s): it cannot be %s.", c.CaptureMethod, c.Status, done)}
	}
	switch status := deref(c.AuthorizationStatus); {
	case status == authorizationExpired, status == authorizationOpen && lapsed:
		return &refusal{codeAuthorizationExpired, "This authorization expired: nothing more can be captured or voided."}
	case status == authorizationVoided:
		return &refusal{codeChargeVoided, "This authorization was voided: nothing can be " + done + "."}
	case status == authorizationCaptured && done == "voided", c.AmountCaptured > 0 && done == "voided":
		return &refusal{codeChargeCaptured, "This authorization has a capture: it can no longer be voided (refund the capture instead)."}
	case status == authorizationCaptured:
		return &refusal{codeChargeNotCapturable, "This authorization was captured in full, or its final capture made: nothing more can be captured."}
	}
	return nil
}

// expireNow makes the open authorization of charge id expire now (a
// control for tests). expired is false when it was not open: it is
// returned as it is, and nothing changed.
func (s *store) expireNow(ctx context.Context, id string) (c charge, expired bool, err error) {
	if err := s.settleDue(ctx); err != nil {
		return c, false, err
	}
	row, err := s.queries.ExpireAuthorizationNow(ctx, id)
	return s.afterResolve(ctx, id, row, err)
}

// getCapture returns the capture with id, or errNoCapture.
func (s *store) getCapture(ctx context.Context, id string) (capture, error) {
	row, err := s.queries.GetCapture(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return capture{}, errNoCapture
	}
	if err != nil {
		return capture{}, err
	}
	return captureFromRow(row)
}

// getVoid returns the void with id, or errNoVoid.
func (s *store) getVoid(ctx context.Context, id string) (void, error) {
	row, err := s.queries.GetVoid(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return void{}, errNoVoid
	}
	if err != nil {
		return void{}, err
	}
	return voidFromRow(row)
}

// listCaptures returns the captures that f selects, newest first, at most
// f.Limit of them, and whether more follow. A page after a capture that
// does not exist is errNoCapture.
func (s *store) listCaptures(ctx context.Context, f captureFilter) ([]capture, bool, error) {
	if f.StartingAfter != nil {
		if _, err := s.getCapture(ctx, *f.StartingAfter); err != nil {
			return nil, false, err
		}
	}
	rows, err := s.queries.ListCaptures(ctx, sqlc.ListCapturesParams{
		ChargeID: f.Charge, IdempotencyKey: f.IdempotencyKey, AttemptID: f.AttemptID, Merchant: f.Merchant,
		Status: f.Status, StartingAfter: f.StartingAfter, RowLimit: f.Limit + 1,
	})
	if err != nil {
		return nil, false, err
	}
	return pageOf(rows, f.Limit, captureFromRow)
}

// listVoids returns the voids that f selects; as listCaptures.
func (s *store) listVoids(ctx context.Context, f voidFilter) ([]void, bool, error) {
	if f.StartingAfter != nil {
		if _, err := s.getVoid(ctx, *f.StartingAfter); err != nil {
			return nil, false, err
		}
	}
	rows, err := s.queries.ListVoids(ctx, sqlc.ListVoidsParams{
		ChargeID: f.Charge, IdempotencyKey: f.IdempotencyKey, AttemptID: f.AttemptID, Merchant: f.Merchant,
		StartingAfter: f.StartingAfter, RowLimit: f.Limit + 1,
	})
	if err != nil {
		return nil, false, err
	}
	return pageOf(rows, f.Limit, voidFromRow)
}

func captureFromRow(row sqlc.CardsimCapture) (capture, error) {
	metadata := map[string]string{}
	if err := json.Unmarshal(row.Metadata, &metadata); err != nil {
		return capture{}, fmt.Errorf("decode metadata of capture %s: %w", row.ID, err)
	}
	return capture{
		ID: row.ID, ChargeID: row.ChargeID, IdempotencyKey: row.IdempotencyKey,
		Amount: row.Amount, Currency: row.Currency, Final: row.Final, Status: row.Status,
		FailureCode: row.FailureCode, FailureMessage: row.FailureMessage,
		Metadata: metadata, Created: row.CreatedAt,
	}, nil
}

func voidFromRow(row sqlc.CardsimVoid) (void, error) {
	metadata := map[string]string{}
	if err := json.Unmarshal(row.Metadata, &metadata); err != nil {
		return void{}, fmt.Errorf("decode metadata of void %s: %w", row.ID, err)
	}
	return void{
		ID: row.ID, ChargeID: row.ChargeID, IdempotencyKey: row.IdempotencyKey,
		Metadata: metadata, Created: row.CreatedAt,
	}, nil
}
