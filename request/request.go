// Package request carries what one request to chargeonce is known by, from
// the HTTP edge down to the rows it writes and the events it causes: its id
// (the X-Request-Id it was answered with) and the W3C trace it belongs to.
// The edge sets the id (With); the tracing middleware puts the trace in the
// context, remote (the caller's traceparent) or local (a span of ours).
// The payment engine, the history and the outbox read both from here, so
// none of them imports the HTTP layer.
package request

import (
	"context"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
)

type idKey struct{}

// With returns ctx carrying the request id id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, idKey{}, id)
}

// ID is the id of the request ctx belongs to, "" outside one (a background
// pass).
func ID(ctx context.Context) string {
	id, _ := ctx.Value(idKey{}).(string)
	return id
}

// UUID is id as a UUID when it is one as the edge makes them (lowercase,
// hyphenated), so that a uuid column gives back the same text; false for
// any other id (an X-Request-Id of the caller's own making).
func UUID(id string) (uuid.UUID, bool) {
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id {
		return uuid.Nil, false
	}
	return u, true
}

// TraceID is the W3C trace id (32 hex digits) of the trace ctx belongs to,
// "" when it belongs to none.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.TraceID().IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
