package payment

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"chargeonce/tracing"
)

// The engine's spans (package tracing): the claim, each provider call
// (provider.go), the finalizing write, the reconciler's and the retention
// cleaner's passes and each attempt the reconciler works on, which links
// back to the request that claimed it. They name the attempt, never what
// was sent for it.

var tracer = tracing.Tracer("payment")

// attemptAttributes are what every span about a names.
func attemptAttributes(a Attempt) []attribute.KeyValue {
	return []attribute.KeyValue{tracing.KeyKind.String(string(a.Kind)), tracing.KeyIdempotencyKey.String(a.IdempotencyKey),
		tracing.KeyAttemptID.String(a.ID.String()), tracing.KeyMerchantID.String(a.MerchantID.String()),
		tracing.KeyProviderKey.String(a.ProviderKey)}
}

// startSpan starts the span name about a, with a's attributes and attrs.
// They are built only for a span that records: with tracing off, a span
// on the path of every request costs no allocation.
func startSpan(ctx context.Context, name string, a Attempt, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := tracer.Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(append(attemptAttributes(a), attrs...)...)
	}
	return ctx, span
}

// traceClaim runs claim, the claim of a's key, in its span
// (payment.claim), which the attempt's row names (claim_source): a later
// holder's span links back to it.
func traceClaim(ctx context.Context, a Attempt, claim func(context.Context) (claim, error)) (claim, error) {
	ctx, span := startSpan(ctx, "payment.claim", a)
	defer span.End()
	c, err := claim(ctx)
	switch {
	case err != nil:
		span.SetStatus(codes.Error, ErrorCode(err))
	case !span.IsRecording():
	case c.outcome == claimedByUs:
		span.SetAttributes(attribute.String("chargeonce.claim", "claimed"))
	case c.outcome == foundStored:
		span.SetAttributes(attribute.String("chargeonce.claim", "stored"))
	default:
		span.SetAttributes(attribute.String("chargeonce.claim", "not_visible_yet"))
	}
	return c, err
}

// endSpan ends span, marked failed by err if any.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
