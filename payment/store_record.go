package payment

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/sqlc"
)

// recordings writes the recordings of plain charges (RecordChargeSucceeded),
// those that concurrent requests make while they wait for a connection in
// one statement (RecordChargesSucceeded): each fenced on its own attempt's
// fence, each fenced out (a nil row) on its own.
type recordings = batcher[sqlc.RecordChargeSucceededParams, *sqlc.ChargeAttempt]

// The most recordings in one batch.
const recordingsBatch = 64

func newRecordings(pool *pgxpool.Pool) *recordings {
	return newBatcher(pool, recordingsBatch,
		func(ctx context.Context, conn *pgxpool.Conn, arg sqlc.RecordChargeSucceededParams) (*sqlc.ChargeAttempt, error) {
			return recordOne(ctx, sqlc.New(conn), arg)
		}, recordMany)
}

// recordOne writes one recording: the attempt's row as the write left it,
// or nil when it wrote nothing: the attempt was finalized or taken over by
// someone else, or this provider charge is recorded already (the provider
// key is the attempt's, so whoever recorded it finalized the attempt).
// Either way the record's owner writes it.
func recordOne(ctx context.Context, q *sqlc.Queries, arg sqlc.RecordChargeSucceededParams) (*sqlc.ChargeAttempt, error) {
	row, err := q.RecordChargeSucceeded(ctx, arg)
	if kind, constraint := db.Classify(err); isNotFound(err) || kind == db.UniqueViolation && constraint == constraintProviderChargeID {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	attempt := sqlc.ChargeAttempt(row)
	return &attempt, nil
}

// recordMany writes a batch's recordings in one statement on conn.
func recordMany(ctx context.Context, conn *pgxpool.Conn, batch []*batched[sqlc.RecordChargeSucceededParams, *sqlc.ChargeAttempt]) error {
	var arg sqlc.RecordChargesSucceededParams
	for _, w := range batch {
		a := w.in
		arg.ID = append(arg.ID, a.ID)
		arg.Fence = append(arg.Fence, a.Fence)
		arg.ChargeID = append(arg.ChargeID, a.ChargeID)
		arg.Now = append(arg.Now, a.Now)
		arg.ExpiresAt = append(arg.ExpiresAt, a.ExpiresAt)
		arg.ProviderChargeID = append(arg.ProviderChargeID, a.ProviderChargeID)
		arg.EventID = append(arg.EventID, a.EventID)
		arg.EventBody = append(arg.EventBody, a.EventBody)
		arg.EventRequestID = append(arg.EventRequestID, deref(a.EventRequestID))
		arg.Traceparent = append(arg.Traceparent, a.Traceparent)
		arg.Tracestate = append(arg.Tracestate, a.Tracestate)
	}
	rows, err := sqlc.New(conn).RecordChargesSucceeded(ctx, arg)
	if err != nil {
		return err
	}
	byID := make(map[uuid.UUID]*sqlc.ChargeAttempt, len(rows))
	for i := range rows {
		row := sqlc.ChargeAttempt(rows[i])
		byID[row.ID] = &row
	}
	for _, w := range batch {
		w.out = byID[w.in.ID]
	}
	return nil
}
