package payment

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/sqlc"
)

// claims writes the claims of charge attempts off checkout sessions
// (ClaimChargeAttempt), those that concurrent requests make while they
// wait for a connection in one statement (ClaimChargeAttempts). Each key
// comes back on its own: its stored attempt, the attempt inserted for it,
// or nil (notVisibleYet).
type claims = batcher[sqlc.ClaimChargeAttemptParams, *sqlc.ClaimChargeAttemptRow]

// The most claims in one batch.
const claimsBatch = 64

func newClaims(pool *pgxpool.Pool) *claims {
	return newBatcher(pool, claimsBatch, claimOne, claimMany)
}

// claimOne claims one key (ClaimChargeAttempt) on conn: nil when no row
// came back.
func claimOne(ctx context.Context, conn *pgxpool.Conn, arg sqlc.ClaimChargeAttemptParams) (*sqlc.ClaimChargeAttemptRow, error) {
	row, err := sqlc.New(conn).ClaimChargeAttempt(ctx, arg)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &row, nil
}

// keyScope is what a key is claimed in: its merchant and its session's
// keys (uuid.Nil: the merchant's own).
type keyScope struct {
	merchant, session uuid.UUID
	key               string
}

// scopeOf is the scope of merchant's key among the keys of session (nil:
// the merchant's own), as a claim asks for it and as an attempt holds it.
func scopeOf(merchant uuid.UUID, session *uuid.UUID, key string) keyScope {
	return keyScope{merchant: merchant, session: deref(session), key: key}
}

// claimMany claims a batch's keys in one statement on conn.
func claimMany(ctx context.Context, conn *pgxpool.Conn, batch []*batched[sqlc.ClaimChargeAttemptParams, *sqlc.ClaimChargeAttemptRow]) error {
	var arg sqlc.ClaimChargeAttemptsParams
	for _, w := range batch {
		a := w.in
		arg.ID = append(arg.ID, a.ID)
		arg.MerchantID = append(arg.MerchantID, a.MerchantID)
		arg.IdempotencyKey = append(arg.IdempotencyKey, a.IdempotencyKey)
		arg.Fingerprint = append(arg.Fingerprint, a.Fingerprint)
		arg.ProviderKey = append(arg.ProviderKey, deref(a.ProviderKey))
		arg.Amount = append(arg.Amount, a.Amount)
		arg.Currency = append(arg.Currency, a.Currency)
		arg.PaymentMethod = append(arg.PaymentMethod, deref(a.PaymentMethod))
		arg.OrderID = append(arg.OrderID, deref(a.OrderID))
		arg.Description = append(arg.Description, deref(a.Description))
		arg.LockedUntil = append(arg.LockedUntil, a.LockedUntil)
		arg.ExpiresAt = append(arg.ExpiresAt, a.ExpiresAt)
		arg.ReturnURL = append(arg.ReturnURL, deref(a.ReturnURL))
		arg.KeySessionID = append(arg.KeySessionID, deref(a.KeySessionID))
		arg.CaptureMethod = append(arg.CaptureMethod, deref(a.CaptureMethod))
		arg.ClaimRequestID = append(arg.ClaimRequestID, deref(a.ClaimRequestID))
		arg.ClaimInstance = append(arg.ClaimInstance, deref(a.ClaimInstance))
		arg.ClaimSource = append(arg.ClaimSource, a.ClaimSource)
		arg.Now = append(arg.Now, a.Now)
	}
	rows, err := sqlc.New(conn).ClaimChargeAttempts(ctx, arg)
	if err != nil {
		return err
	}
	inserted := make(map[uuid.UUID]*sqlc.ClaimChargeAttemptRow)
	stored := make(map[keyScope]*sqlc.ClaimChargeAttemptRow)
	for i := range rows {
		row := sqlc.ClaimChargeAttemptRow(rows[i])
		if row.Claimed {
			inserted[row.ChargeAttempt.ID] = &row
		} else {
			a := row.ChargeAttempt
			stored[scopeOf(a.MerchantID, a.KeySessionID, a.IdempotencyKey)] = &row
		}
	}
	for _, w := range batch {
		if row, ok := inserted[w.in.ID]; ok {
			w.out = row
		} else {
			w.out = stored[scopeOf(w.in.MerchantID, w.in.KeySessionID, w.in.IdempotencyKey)]
		}
	}
	return nil
}
