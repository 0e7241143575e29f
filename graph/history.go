package graph

import (
	"context"
	"strings"

	"chargeonce/graph/model"
	"chargeonce/history"
	"chargeonce/payment"
)

// The kinds of the history queries.
const (
	chargeKind = payment.KindCharge
	refundKind = payment.KindRefund
)

// attemptKind is the domain's kind of the API's.
func attemptKind(k model.AttemptKind) payment.Kind { return payment.Kind(strings.ToLower(string(k))) }

// history is the history of the caller's key of kind: secret keys only.
func (r *Resolver) history(ctx context.Context, kind payment.Kind, key string) ([]*model.AttemptEvent, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireSecret(st, string(kind)+"History"); err != nil {
		return nil, err
	}
	if err := payment.ValidateKey(key); err != nil {
		return nil, err
	}
	events, err := r.Payments.History(ctx, m, kind, key)
	if err != nil {
		return nil, err
	}
	out := make([]*model.AttemptEvent, len(events))
	for i, e := range events {
		out[i] = AttemptEvent(e)
	}
	return out, nil
}

// AttemptEvent is a history row as the API answers it.
func AttemptEvent(e history.Event) *model.AttemptEvent {
	ev := &model.AttemptEvent{At: e.At, Type: e.Type, RequestID: optional(e.RequestID), TraceID: optional(e.TraceID),
		Instance: optional(e.Instance), Detail: optional(HistoryDetail(e.Detail)), Count: e.Count}
	if e.Status != "" {
		status := model.ChargeStatus(e.Status)
		ev.Status = &status
	}
	if !e.LastAt.IsZero() {
		ev.LastAt = &e.LastAt
	}
	return ev
}

// HistoryDetail is a row's detail with the domain's error code it names,
// if any, as the API's extensions.code: "ORDER_ALREADY_PAID: …".
func HistoryDetail(detail string) string {
	code, rest, ok := strings.Cut(detail, ": ")
	if api, known := errorCodes[code]; ok && known {
		return api + ": " + rest
	}
	return detail
}
