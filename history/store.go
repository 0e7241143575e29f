package history

// The history's store: the only code here that knows the generated
// queries. Its reads (List, ClaimSpan), the recorder's write, the
// retention's delete, and the arrays a ledger's statement writes its own
// rows with (InsertParams).

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// write writes rows and counts in one transaction.
func write(ctx context.Context, pool *pgxpool.Pool, rows []Entry, counts map[countKey]*counted) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		if len(rows) > 0 {
			if err := q.InsertHistory(ctx, InsertParams(rows)); err != nil {
				return err
			}
		}
		if len(counts) > 0 {
			return q.AddHistoryCounts(ctx, countParams(counts))
		}
		return nil
	})
}

// InsertParams are entries as InsertHistory's arrays.
func InsertParams(entries []Entry) sqlc.InsertHistoryParams {
	n := len(entries)
	p := sqlc.InsertHistoryParams{
		MerchantID: make([]uuid.UUID, n), Kind: make([]string, n), IdempotencyKey: make([]string, n),
		AttemptID: make([]uuid.UUID, n), At: make([]time.Time, n), Type: make([]string, n),
		RequestID: make([]string, n), TraceID: make([]string, n), SpanID: make([]string, n),
		Instance: make([]string, n), Detail: make([]string, n), Status: make([]string, n),
	}
	for i, e := range entries {
		p.MerchantID[i], p.Kind[i], p.IdempotencyKey[i], p.AttemptID[i] = e.MerchantID, e.Kind, e.IdempotencyKey, e.AttemptID
		p.At[i], p.Type[i], p.Detail[i], p.Status[i] = e.At, e.Type, e.Detail, e.Status
		p.RequestID[i], p.TraceID[i], p.SpanID[i], p.Instance[i] = e.RequestID, e.TraceID, e.SpanID, e.Instance
	}
	return p
}

// countParams are counted rows as AddHistoryCounts's arrays.
func countParams(counts map[countKey]*counted) sqlc.AddHistoryCountsParams {
	n := len(counts)
	p := sqlc.AddHistoryCountsParams{
		MerchantID: make([]uuid.UUID, 0, n), Kind: make([]string, 0, n), IdempotencyKey: make([]string, 0, n),
		AttemptID: make([]uuid.UUID, 0, n), At: make([]time.Time, 0, n), Type: make([]string, 0, n),
		RequestID: make([]string, 0, n), TraceID: make([]string, 0, n), SpanID: make([]string, 0, n),
		Instance: make([]string, 0, n), Count: make([]int32, 0, n), LastAt: make([]time.Time, 0, n),
	}
	for _, c := range counts {
		e := c.first
		p.MerchantID = append(p.MerchantID, e.MerchantID)
		p.Kind = append(p.Kind, e.Kind)
		p.IdempotencyKey = append(p.IdempotencyKey, e.IdempotencyKey)
		p.AttemptID = append(p.AttemptID, e.AttemptID)
		p.At = append(p.At, e.At)
		p.Type = append(p.Type, e.Type)
		p.RequestID = append(p.RequestID, e.RequestID)
		p.TraceID = append(p.TraceID, e.TraceID)
		p.SpanID = append(p.SpanID, e.SpanID)
		p.Instance = append(p.Instance, e.Instance)
		p.Count = append(p.Count, int32(c.n))
		p.LastAt = append(p.LastAt, c.last)
	}
	return p
}
