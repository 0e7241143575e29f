package cardsim

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/cardsim/internal/sqlc"
)

// The stored statuses of a charge. Only requires_action ever changes, once,
// to one of the others.
const (
	statusSucceeded      = "succeeded"
	statusFailed         = "failed"
	statusRequiresAction = "requires_action" // waits for the shopper to authenticate
	statusCanceled       = "canceled"        // stopped waiting at the caller's request
)

var (
	errKeyReused = errors.New("idempotency key reused with other parameters")
	errNoCharge  = errors.New("no such charge")
)

// charge is a stored charge, as the handlers see it.
type charge struct {
	ID             string
	IdempotencyKey string
	Amount         int64
	Currency       string
	Status         string
	PaymentMethod  string
	Description    *string
	FailureCode    *string
	FailureMessage *string
	Metadata       map[string]string
	Created        time.Time
	// ReturnURL is nil when the request had none; CancellationReason is set
	// when the caller gave one with its cancel.
	ReturnURL          *string
	CancellationReason *string
	// AmountRefunded is the sum of the charge's succeeded refunds.
	AmountRefunded int64
	// CaptureMethod is captureAutomatic or captureManual. A manual charge
	// that succeeded is an authorization: AuthorizationStatus (open,
	// captured, voided or expired) and AuthorizationExpiresAt are set, and
	// AmountCaptured is what its captures took; nil and 0 otherwise.
	CaptureMethod          string
	AuthorizationStatus    *string
	AuthorizationExpiresAt *time.Time
	AmountCaptured         int64
}

// The capture methods of a charge.
const (
	captureAutomatic = "automatic"
	captureManual    = "manual"
)

// The statuses of an authorization.
const (
	authorizationOpen     = "open"
	authorizationCaptured = "captured"
	authorizationVoided   = "voided"
	authorizationExpired  = "expired"
)

// store keeps the simulator's charges, refunds, captures and voids in the
// cardsim schema. It is the only code that knows the generated queries and
// their rows.
type store struct {
	db      *pgxpool.Pool // for the transactions of refunds, captures and voids
	queries *sqlc.Queries
	// authorizationWindow is how long an authorization stays open.
	authorizationWindow pgtype.Interval
}

func newStore(pool *pgxpool.Pool, authorizationWindow time.Duration) *store {
	return &store{
		db: pool, queries: sqlc.New(pool),
		authorizationWindow: pgtype.Interval{Microseconds: authorizationWindow.Microseconds(), Valid: true},
	}
}

// create stores the charge of key, or finds the one stored by an earlier
// request with that key (replayed is then true). The insert alone decides who
// wins a key, so concurrent requests cannot store two charges.
func (s *store) create(ctx context.Context, key string, req createRequest, spec tokenSpec) (c charge, replayed bool, err error) {
	metadata, err := json.Marshal(req.Metadata)
	if err != nil {
		return c, false, err
	}
	hash := requestHash(req)
	params := sqlc.InsertChargeParams{
		ID:             newID("ch_"),
		IdempotencyKey: key,
		RequestHash:    hash,
		Amount:         req.Amount,
		Currency:       req.Currency,
		PaymentMethod:  req.PaymentMethod,
		Description:    req.Description,
		Metadata:       metadata,
		ReturnURL:      req.ReturnURL,
		CaptureMethod:  cmp.Or(req.CaptureMethod, captureAutomatic),
		// Used only for a manual charge that succeeds.
		AuthorizationWindow: s.authorizationWindow,
	}
	status, failureCode, failureMessage := spec.outcome(req.ReturnURL != nil)
	params.Status = status
	if status == statusFailed {
		params.FailureCode = &failureCode
		params.FailureMessage = &failureMessage
	}
	row, err := s.queries.InsertCharge(ctx, params)
	if err == nil {
		c, err = chargeFromRow(row)
		return c, false, err
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return c, false, fmt.Errorf("insert charge: %w", err)
	}
	// No row: the key is taken. Charges are never deleted, so it is there.
	if err := s.settleDue(ctx); err != nil {
		return c, false, err
	}
	stored, err := s.queries.GetChargeByIdempotencyKey(ctx, key)
	if err != nil {
		return c, false, fmt.Errorf("load charge of reused key: %w", err)
	}
	if !bytes.Equal(stored.Charge.RequestHash, hash) {
		return c, false, errKeyReused
	}
	c, err = chargeFromRow(stored.Charge)
	c.AmountRefunded = stored.AmountRefunded
	return c, true, err
}

// get returns the charge with id, or errNoCharge.
func (s *store) get(ctx context.Context, id string) (charge, error) {
	if err := s.settleDue(ctx); err != nil {
		return charge{}, err
	}
	row, err := s.queries.GetCharge(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return charge{}, errNoCharge
	}
	if err != nil {
		return charge{}, err
	}
	c, err := chargeFromRow(row.Charge)
	c.AmountRefunded = row.AmountRefunded
	return c, err
}

// paymentMethod is the card of charge id, or errNoCharge.
func (s *store) paymentMethod(ctx context.Context, id string) (string, error) {
	row, err := s.queries.GetCharge(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errNoCharge
	}
	if err != nil {
		return "", err
	}
	return row.Charge.PaymentMethod, nil
}

// completeAuthentication ends the wait of charge id in success. resolved is
// false when the charge did not wait (any more): it is returned as it is, and
// nothing changed. Of the calls that end one wait (this one, failAuthentication
// and cancel), however they race, exactly one resolves it.
func (s *store) completeAuthentication(ctx context.Context, id string) (c charge, resolved bool, err error) {
	row, err := s.queries.CompleteAuthentication(ctx, sqlc.CompleteAuthenticationParams{
		ID: id, AuthorizationWindow: s.authorizationWindow,
	})
	return s.afterResolve(ctx, id, row, err)
}

// failAuthentication ends the wait of charge id in failure,
// authentication_failed; as completeAuthentication otherwise.
func (s *store) failAuthentication(ctx context.Context, id string) (c charge, resolved bool, err error) {
	row, err := s.queries.FailAuthentication(ctx, sqlc.FailAuthenticationParams{
		ID: id, FailureCode: codeAuthenticationFailed, FailureMessage: messageAuthenticationFailed,
	})
	return s.afterResolve(ctx, id, row, err)
}

// cancel ends the wait of charge id as canceled, authentication_abandoned,
// with the caller's reason ("" is none); as completeAuthentication otherwise.
func (s *store) cancel(ctx context.Context, id, reason string) (c charge, resolved bool, err error) {
	params := sqlc.CancelWaitingChargeParams{
		ID: id, FailureCode: codeAuthenticationAbandoned, FailureMessage: cancelMessage(reason),
	}
	if reason != "" {
		params.CancellationReason = &reason
	}
	row, err := s.queries.CancelWaitingCharge(ctx, params)
	return s.afterResolve(ctx, id, row, err)
}

// afterResolve reads the answer of a conditional update of charge id: the
// updated row, or, when no row waited, the charge as it is now (errNoCharge
// when there is none).
func (s *store) afterResolve(ctx context.Context, id string, row sqlc.Charge, err error) (charge, bool, error) {
	if err == nil {
		c, err := chargeFromRow(row)
		return c, true, err
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return charge{}, false, fmt.Errorf("resolve charge %s: %w", id, err)
	}
	c, err := s.get(ctx, id)
	return c, false, err
}

// list returns the charges that f selects, newest first, at most f.Limit of
// them, and whether more follow. A page after a charge that does not exist
// is errNoCharge.
func (s *store) list(ctx context.Context, f listFilter) (charges []charge, more bool, err error) {
	if err := s.settleDue(ctx); err != nil {
		return nil, false, err
	}
	if f.StartingAfter != nil {
		if _, err := s.queries.GetCharge(ctx, *f.StartingAfter); errors.Is(err, pgx.ErrNoRows) {
			return nil, false, errNoCharge
		} else if err != nil {
			return nil, false, err
		}
	}
	rows, err := s.queries.ListCharges(ctx, sqlc.ListChargesParams{
		IdempotencyKey:       f.IdempotencyKey,
		ClientIdempotencyKey: f.ClientIdempotencyKey,
		Merchant:             f.Merchant,
		AttemptID:            f.AttemptID,
		OrderID:              f.OrderID,
		Status:               f.Status,
		CaptureMethod:        f.CaptureMethod,
		AuthorizationStatus:  f.AuthorizationStatus,
		StartingAfter:        f.StartingAfter,
		RowLimit:             f.Limit + 1, // one more, to know whether more follow
	})
	if err != nil {
		return nil, false, err
	}
	rows, more = trimPage(rows, f.Limit)
	charges = make([]charge, 0, len(rows))
	for _, row := range rows {
		c, err := chargeFromRow(row.Charge)
		if err != nil {
			return nil, false, err
		}
		c.AmountRefunded = row.AmountRefunded
		charges = append(charges, c)
	}
	return charges, more, nil
}

// pageOf is the page of rows, read with a limit one more than limit, as
// the handlers see it (what from makes of each row), and whether more
// follow it.
func pageOf[R, T any](rows []R, limit int32, from func(R) (T, error)) ([]T, bool, error) {
	rows, more := trimPage(rows, limit)
	page := make([]T, 0, len(rows))
	for _, row := range rows {
		v, err := from(row)
		if err != nil {
			return nil, false, err
		}
		page = append(page, v)
	}
	return page, more, nil
}

// trimPage cuts rows, read with a limit one more than limit, to limit, and
// reports whether it cut: whether more follow the page.
func trimPage[T any](rows []T, limit int32) ([]T, bool) {
	if len(rows) > int(limit) {
		return rows[:limit], true
	}
	return rows, false
}

func chargeFromRow(row sqlc.Charge) (charge, error) {
	metadata := map[string]string{}
	if err := json.Unmarshal(row.Metadata, &metadata); err != nil {
		return charge{}, fmt.Errorf("decode metadata of charge %s: %w", row.ID, err)
	}
	return charge{
		ID:                 row.ID,
		IdempotencyKey:     row.IdempotencyKey,
		Amount:             row.Amount,
		Currency:           row.Currency,
		Status:             row.Status,
		PaymentMethod:      row.PaymentMethod,
		Description:        row.Description,
		FailureCode:        row.FailureCode,
		FailureMessage:     row.FailureMessage,
		Metadata:           metadata,
		Created:            row.CreatedAt,
		ReturnURL:          row.ReturnURL,
		CancellationReason: row.CancellationReason,
		CaptureMethod:      row.CaptureMethod,
		// The authorization's status as stored: settleDue made it expired
		// if its time had passed.
		AuthorizationStatus:    row.AuthorizationStatus,
		AuthorizationExpiresAt: row.AuthorizationExpiresAt,
		AmountCaptured:         row.AmountCaptured,
	}, nil
}

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// newID returns prefix ("ch_" for a charge, "re_" for a refund, "cp_" for
// a capture, "vd_" for a void) and 24
// random alphanumerics, drawn without modulo bias from crypto/rand so that
// ids cannot be guessed.
func newID(prefix string) string {
	const n = 24
	id := make([]byte, 0, len(prefix)+n)
	id = append(id, prefix...)
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
