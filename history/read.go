package history

import (
	"context"
	"time"

	"github.com/google/uuid"

	"chargeonce/sqlc"
)

// MaxRows bounds the rows one read answers: a key's history is short (its
// counted rows stand for any number of requests), and the bound keeps one
// read cheap whatever a key went through.
const MaxRows = 1000

// List is the history of merchantID's key of kind, oldest first; empty
// when there is none.
func List(ctx context.Context, db sqlc.DBTX, merchantID uuid.UUID, kind, key string) ([]Event, error) {
	rows, err := sqlc.New(db).ListHistory(ctx, sqlc.ListHistoryParams{
		MerchantID: merchantID, IdempotencyKey: key, Kind: kind, MaxRows: MaxRows,
	})
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{At: r.At, Type: r.Type, RequestID: deref(r.RequestID), TraceID: deref(r.TraceID),
			SpanID: deref(r.SpanID), Instance: deref(r.Instance), Detail: deref(r.Detail), Status: deref(r.Status),
			Count: int(r.Count), LastAt: deref(r.LastAt), AttemptID: deref(r.AttemptID)}
	}
	return out, nil
}

// Delete forgets up to limit rows older than cutoff whose key has no
// attempt any more.
func Delete(ctx context.Context, db sqlc.DBTX, cutoff time.Time, limit int) (int, error) {
	n, err := sqlc.New(db).DeleteOldHistory(ctx, sqlc.DeleteOldHistoryParams{Cutoff: cutoff, MaxRows: int32(limit)})
	return int(n), err
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// ClaimSpan is the trace and span of the request that claimed k's
// attempt, "" when it was in none.
func ClaimSpan(ctx context.Context, db sqlc.DBTX, k Key) (traceID, spanID string, err error) {
	row, err := sqlc.New(db).ClaimSpan(ctx, sqlc.ClaimSpanParams{
		AttemptID: &k.AttemptID, MerchantID: k.MerchantID, IdempotencyKey: k.IdempotencyKey, Kind: k.Kind,
	})
	return deref(row.TraceID), deref(row.SpanID), err
}
