package cardsim

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"chargeonce/cardsim/internal/sqlc"
)

// The stored statuses of a charge.
const (
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
)

var errKeyReused = errors.New("idempotency key reused with other parameters")

// storeCharge stores the charge of key, or finds the one stored by an earlier
// request with that key (replayed is then true). The insert alone decides who
// wins a key, so concurrent requests cannot store two charges.
func (h *handler) storeCharge(ctx context.Context, key string, req createRequest, spec tokenSpec) (charge sqlc.Charge, replayed bool, err error) {
	metadata, err := json.Marshal(req.Metadata)
	if err != nil {
		return charge, false, err
	}
	hash := requestHash(req)
	params := sqlc.InsertChargeParams{
		ID:             newChargeID(),
		IdempotencyKey: key,
		RequestHash:    hash,
		Amount:         req.Amount,
		Currency:       req.Currency,
		PaymentMethod:  req.PaymentMethod,
		Description:    req.Description,
		Status:         statusSucceeded,
		Metadata:       metadata,
	}
	if spec.behaviour == decline {
		params.Status = statusFailed
		params.FailureCode = &spec.failureCode
		params.FailureMessage = &spec.failureMessage
	}
	charge, err = h.queries.InsertCharge(ctx, params)
	if err == nil {
		return charge, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return charge, false, fmt.Errorf("insert charge: %w", err)
	}
	// No row: the key is taken. Charges are never deleted, so it is there.
	charge, err = h.queries.GetChargeByIdempotencyKey(ctx, key)
	if err != nil {
		return charge, false, fmt.Errorf("load charge of reused key: %w", err)
	}
	if !bytes.Equal(charge.RequestHash, hash) {
		return charge, false, errKeyReused
	}
	return charge, true, nil
}

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// newChargeID returns "ch_" and 24 random alphanumerics, drawn without modulo
// bias from crypto/rand so that ids cannot be guessed.
func newChargeID() string {
	const n = 24
	id := make([]byte, 0, 3+n)
	id = append(id, "ch_"...)
	var random [32]byte
	for len(id) < cap(id) {
		_, _ = rand.Read(random[:]) // never fails (crypto/rand since Go 1.24)
		for _, b := range random {
			// 248 is the largest multiple of 62 within a byte.
			if b < 248 && len(id) < cap(id) {
				id = append(id, idAlphabet[int(b)%len(idAlphabet)])
			}
		}
	}
	return string(id)
}
