package history

// The history's store: the only code here that knows the generated
// queries. Its reads (List, ClaimSpan), the recorder's write, the
// retention's delete, and the JSON a ledger's statement writes its own row
// with (EntriesJSON).

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/request"
	"chargeonce/sqlc"
)

// MaxRows bounds the rows one read answers: a key's history is short (its
// counted rows stand for any number of requests), and the bound keeps one
// read cheap whatever a key went through.
const MaxRows = 1000

// entryJSON is an entry as a row's entries hold it.
type entryJSON struct {
	At     time.Time `json:"at"`
	Type   string    `json:"type"`
	Detail string    `json:"detail,omitempty"`
	Status string    `json:"status,omitempty"`
}

// EntriesJSON is entries as one row's JSON array.
func EntriesJSON(entries []Entry) []byte {
	out := make([]entryJSON, len(entries))
	for i, e := range entries {
		// To the microsecond, as PostgreSQL keeps the times it writes itself.
		out[i] = entryJSON{At: e.At.Truncate(time.Microsecond), Type: e.Type, Detail: e.Detail, Status: e.Status}
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(err) // strings and times always marshal
	}
	return b
}

// SourceJSON is src as an attempt's row keeps its claim's (claim_source).
func SourceJSON(src Source) []byte {
	b, err := json.Marshal(src)
	if err != nil {
		panic(err) // strings always marshal
	}
	return b
}

// SourceColumns is a claim's Source as its attempt's row keeps it: the
// request's id in claim_request_id where it is a UUID (request.UUID: 16 B,
// not 36 characters of JSON), the instance in claim_instance, and what is
// left (an id of the caller's making, the trace) in claim_source, nil when
// nothing is. charge_attempt_claim_source gives them back as one JSON, the
// one SourceJSON would have written.
type SourceColumns struct {
	RequestID *uuid.UUID
	Instance  *string
	Rest      []byte
}

// ColumnsOf is src as an attempt's row keeps it.
func ColumnsOf(src Source) SourceColumns {
	var c SourceColumns
	if id, ok := request.UUID(src.RequestID); ok {
		c.RequestID, src.RequestID = &id, ""
	}
	if instance := src.Instance; instance != "" {
		c.Instance, src.Instance = &instance, ""
	}
	if src != (Source{}) {
		c.Rest = SourceJSON(src)
	}
	return c
}

// sourceOf reads a claim_source; a claim from before it was kept has none.
func sourceOf(b []byte) Source {
	var src Source
	_ = json.Unmarshal(b, &src) // the column holds only what SourceJSON wrote
	return src
}

// List is the history of merchantID's key of kind, oldest first; empty
// when there is none. What the ledger holds is read from it rather than
// written twice: each claim (who claimed the attempt, on its row) and the
// provider.sent it allowed (the attempt's provider key), a finalization
// that no row records (a fresh charge's: its answer and result are its
// attempt's row), and the events (written, published).
func List(ctx context.Context, db sqlc.DBTX, merchantID uuid.UUID, kind, key string) ([]Event, error) {
	q := sqlc.New(db)
	attempts, err := q.ListHistoryAttempts(ctx, sqlc.ListHistoryAttemptsParams{MerchantID: merchantID, IdempotencyKey: key, Kind: kind})
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(attempts))
	for i, a := range attempts {
		ids[i] = a.ID
	}
	rows, err := q.ListHistory(ctx, sqlc.ListHistoryParams{AttemptIds: ids, MerchantID: &merchantID, IdempotencyKey: &key, Kind: &kind, MaxRows: MaxRows})
	if err != nil {
		return nil, err
	}
	counts, err := q.ListHistoryCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	evs, err := q.ListHistoryEvents(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []Event
	finalized := map[uuid.UUID]bool{}
	// claims are each attempt's claim, whose request the finalization read
	// from the attempt's row was made by.
	claims := map[uuid.UUID]Event{}
	for _, a := range attempts {
		src := sourceOf(a.ClaimSource)
		claimed := Event{At: a.CreatedAt, Type: Claimed, Count: 1, AttemptID: a.ID,
			RequestID: src.RequestID, TraceID: src.TraceID, SpanID: src.SpanID, Instance: src.Instance}
		claims[a.ID] = claimed
		// The send its claim allowed, under the attempt's provider key.
		sent := claimed
		sent.Type, sent.Detail = ProviderSent, "holder 1 sends under provider key "+a.ProviderKey
		out = append(out, claimed, sent)
	}
	for _, r := range rows {
		var entries []entryJSON
		if err := json.Unmarshal(r.Entries, &entries); err != nil {
			return nil, err
		}
		for _, e := range entries {
			ev := Event{At: e.At, Type: e.Type, Detail: e.Detail, Status: e.Status, Count: 1,
				RequestID: deref(r.RequestID), TraceID: deref(r.TraceID), SpanID: deref(r.SpanID),
				Instance: deref(r.Instance), AttemptID: deref(r.AttemptID)}
			out = append(out, ev)
			if e.Type == Finalized {
				finalized[ev.AttemptID] = true
			}
		}
	}
	for _, a := range attempts {
		if a.Status == "PROCESSING" || a.CompletedAt == nil || finalized[a.ID] {
			continue
		}
		// Finalized by the request that claimed it: its answer and its
		// result are the attempt's row.
		answer := "succeeded"
		if a.Status != "SUCCEEDED" {
			answer = "failed: " + deref(a.FailureCode)
		}
		if id := a.ProviderID; id != "" {
			answer += " (" + id + ")"
		}
		answer += "; recorded " + a.CompletedAt.Sub(a.CreatedAt).Round(time.Millisecond).String() + " after the claim"
		by := claims[a.ID]
		by.At, by.Count, by.AttemptID = *a.CompletedAt, 1, a.ID
		answered, final := by, by
		answered.Type, answered.Detail = ProviderAnswered, answer
		final.Type, final.Status = Finalized, a.Status
		final.Detail = "by the request that claimed it; its result is kept until " + a.ExpiresAt.UTC().Format(time.RFC3339)
		out = append(out, answered, final)
	}
	for _, e := range evs {
		out = append(out, Event{At: e.OccurredAt, Type: EventWritten, Detail: e.Type + " " + e.ID.String(), Count: 1, AttemptID: deref(e.AttemptID)})
		if e.SentAt != nil {
			out = append(out, Event{At: *e.SentAt, Type: EventPublished, Detail: e.Type + " " + e.ID.String(), Count: 1, AttemptID: deref(e.AttemptID)})
		}
	}
	for _, c := range counts {
		out = append(out, Event{At: c.FirstAt, Type: c.Type, Count: int(c.Count), LastAt: c.LastAt,
			RequestID: deref(c.RequestID), TraceID: deref(c.TraceID), Instance: deref(c.Instance), AttemptID: c.AttemptID})
	}
	// By time; at one instant, in the order appended: a row's entries as
	// written, what is read from the ledger after them.
	slices.SortStableFunc(out, func(a, b Event) int { return a.At.Compare(b.At) })
	inferStatuses(out)
	inferWriters(out)
	return out, nil
}

// inferStatuses sets each event's status after it: an attempt is
// PROCESSING until an entry says it is final; a replay answers the final
// one; a refusal before any attempt has none.
func inferStatuses(events []Event) {
	status := map[uuid.UUID]string{}
	final := map[uuid.UUID]string{}
	for _, e := range events {
		if e.Status != "" {
			final[e.AttemptID] = e.Status
		}
	}
	for i, e := range events {
		switch {
		case e.AttemptID == uuid.Nil:
			continue
		case e.Status != "":
			status[e.AttemptID] = e.Status
		case e.Type == Replayed:
			events[i].Status = final[e.AttemptID]
		default:
			events[i].Status = cmp.Or(status[e.AttemptID], "PROCESSING")
		}
	}
}

// inferWriters gives an event.written read from the outbox the source of
// the write before it about its attempt: the write that wrote it.
func inferWriters(events []Event) {
	last := map[uuid.UUID]Event{}
	for i, e := range events {
		switch {
		case e.Type == EventWritten && e.Instance == "" && e.RequestID == "":
			w := last[e.AttemptID]
			events[i].RequestID, events[i].TraceID, events[i].SpanID, events[i].Instance = w.RequestID, w.TraceID, w.SpanID, w.Instance
		case e.Instance != "" && !Counted(e.Type):
			last[e.AttemptID] = e
		}
	}
}

// ClaimSpan is the trace and span of the request that claimed k's
// attempt, "" when it was in none.
func ClaimSpan(ctx context.Context, db sqlc.DBTX, k Key) (traceID, spanID string, err error) {
	b, err := sqlc.New(db).ClaimSpan(ctx, k.AttemptID)
	src := sourceOf(b)
	return src.TraceID, src.SpanID, err
}

// Delete forgets up to limit rows older than cutoff that no attempt holds
// any more.
func Delete(ctx context.Context, db sqlc.DBTX, cutoff time.Time, limit int) (int, error) {
	n, err := sqlc.New(db).DeleteOldHistory(ctx, sqlc.DeleteOldHistoryParams{Cutoff: cutoff, MaxRows: int32(limit)})
	return int(n), err
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

// InsertParams are entries as InsertHistory's arrays: one row per run of
// entries about one key by one source.
func InsertParams(entries []Entry) sqlc.InsertHistoryParams {
	var p sqlc.InsertHistoryParams
	for start := 0; start < len(entries); {
		end := start + 1
		for end < len(entries) && entries[end].Key == entries[start].Key && entries[end].Source == entries[start].Source {
			end++
		}
		e := entries[start]
		p.AttemptID = append(p.AttemptID, e.AttemptID)
		p.MerchantID = append(p.MerchantID, e.MerchantID)
		p.Kind = append(p.Kind, e.Kind)
		p.IdempotencyKey = append(p.IdempotencyKey, e.IdempotencyKey)
		p.At = append(p.At, e.At)
		p.RequestID = append(p.RequestID, e.RequestID)
		p.TraceID = append(p.TraceID, e.TraceID)
		p.SpanID = append(p.SpanID, e.SpanID)
		p.Instance = append(p.Instance, e.Instance)
		p.Entries = append(p.Entries, string(EntriesJSON(entries[start:end])))
		start = end
	}
	return p
}

// countParams are counted rows as AddHistoryCounts's arrays.
func countParams(counts map[countKey]*counted) sqlc.AddHistoryCountsParams {
	var p sqlc.AddHistoryCountsParams
	for _, c := range counts {
		e := c.first
		p.AttemptID = append(p.AttemptID, e.AttemptID)
		p.Type = append(p.Type, e.Type)
		p.Count = append(p.Count, int32(c.n))
		p.FirstAt = append(p.FirstAt, e.At)
		p.LastAt = append(p.LastAt, c.last)
		p.RequestID = append(p.RequestID, e.RequestID)
		p.TraceID = append(p.TraceID, e.TraceID)
		p.Instance = append(p.Instance, e.Instance)
	}
	return p
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
