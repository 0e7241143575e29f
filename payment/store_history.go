package payment

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"chargeonce/history"
	"chargeonce/sqlc"
)

// The store's reads of the history of a key (package history); its writes
// ride in the statements and transactions of the ledger (store.go's inTx,
// the claim, takeover and release statements).

// claimSpan is the span of the request that claimed a, as a remote span
// context for a later holder's link back to it; an invalid one when that
// request was in no trace, or its row is gone.
func (s *store) claimSpan(ctx context.Context, a Attempt) (trace.SpanContext, error) {
	traceID, spanID, err := history.ClaimSpan(ctx, s.pool, keyOf(a))
	if err = interpretError(err); err == errNotFound {
		return trace.SpanContext{}, nil
	}
	if err != nil {
		return trace.SpanContext{}, err
	}
	tid, terr := trace.TraceIDFromHex(traceID)
	sid, serr := trace.SpanIDFromHex(spanID)
	if terr != nil || serr != nil {
		return trace.SpanContext{}, nil
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}), nil
}

// historyMerchants are the merchants with a history under key of kind.
func (s *store) historyMerchants(ctx context.Context, kind Kind, key string) ([]Merchant, error) {
	rows, err := s.q.ListHistoryMerchants(ctx, sqlc.ListHistoryMerchantsParams{IdempotencyKey: key, Kind: string(kind)})
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]Merchant, len(rows))
	for i, r := range rows {
		out[i] = Merchant{ID: r.ID, Name: r.Name}
	}
	return out, nil
}
