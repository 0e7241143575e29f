package payment

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/sqlc"
)

// store is the one seam between the domain and PostgreSQL: it runs the sqlc
// queries and turns pgx errors into domain errors. Nothing above it imports pgx.
type store struct {
	pool *pgxpool.Pool
	q    *sqlc.Queries
}

func newStore(pool *pgxpool.Pool) *store {
	return &store{pool: pool, q: sqlc.New(pool)}
}

// errNotFound is returned for a missing row; errFenced for a finalizing write
// that found the attempt already finalized or taken over.
var (
	errNotFound = Errorf(ENOTFOUND, "not found")
	errFenced   = errors.New("attempt was finalized or taken over by someone else")
)

// interpretError translates pgx errors into the domain's.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return errNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("unique violation on %s: %w", pgErr.ConstraintName, err)
	}
	return err
}

// claim inserts the attempt; ok is false when the key was already claimed.
func (s *store) claim(ctx context.Context, p sqlc.ClaimChargeAttemptParams) (a sqlc.ChargeAttempt, ok bool, err error) {
	a, err = s.q.ClaimChargeAttempt(ctx, p)
	if err = interpretError(err); err == errNotFound {
		return a, false, nil
	}
	return a, err == nil, err
}

func (s *store) get(ctx context.Context, merchantID uuid.UUID, key string) (sqlc.GetChargeAttemptRow, error) {
	row, err := s.q.GetChargeAttempt(ctx, sqlc.GetChargeAttemptParams{MerchantID: merchantID, IdempotencyKey: key})
	return row, interpretError(err)
}

// succeed records the charge and finalizes the attempt in one transaction,
// fenced on the attempt number a was claimed with.
func (s *store) succeed(ctx context.Context, a sqlc.ChargeAttempt, providerChargeID string, retentionMs int64) (sqlc.GetChargeAttemptRow, error) {
	var row sqlc.GetChargeAttemptRow
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		c, err := q.InsertCharge(ctx, sqlc.InsertChargeParams{
			ID: uuid.New(), MerchantID: a.MerchantID, Amount: a.Amount, Currency: a.Currency,
			OrderID: a.OrderID, Description: a.Description, ProviderChargeID: providerChargeID,
		})
		if err != nil {
			return err
		}
		done, err := q.SucceedChargeAttempt(ctx, sqlc.SucceedChargeAttemptParams{
			ChargeID: &c.ID, RetentionMs: retentionMs, ID: a.ID, Attempt: a.Attempt,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return errFenced // rolls the charge back: the record's owner writes it
		}
		row = sqlc.GetChargeAttemptRow{ChargeAttempt: done, ProviderChargeID: &c.ProviderChargeID, ChargeCreatedAt: &c.CreatedAt}
		return err
	})
	if errors.Is(err, errFenced) {
		return row, errFenced
	}
	return row, interpretError(err)
}

// fail finalizes the attempt as FAILED, fenced like succeed.
func (s *store) fail(ctx context.Context, a sqlc.ChargeAttempt, code, message string, retentionMs int64) (sqlc.GetChargeAttemptRow, error) {
	done, err := s.q.FailChargeAttempt(ctx, sqlc.FailChargeAttemptParams{
		FailureCode: code, FailureMessage: message, RetentionMs: retentionMs, ID: a.ID, Attempt: a.Attempt,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return sqlc.GetChargeAttemptRow{}, errFenced
	}
	return sqlc.GetChargeAttemptRow{ChargeAttempt: done}, interpretError(err)
}
