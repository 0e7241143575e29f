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
func attemptAttributes(a Attempt) trace.SpanStartOption {
	return trace.WithAttributes(tracing.KeyKind.String(string(a.Kind)), tracing.KeyIdempotencyKey.String(a.IdempotencyKey),
		tracing.KeyAttemptID.String(a.ID.String()), tracing.KeyMerchantID.String(a.MerchantID.String()),
		tracing.KeyProviderKey.String(a.ProviderKey))
}

// traceClaim runs claim, the claim of a's key, in its span
// (payment.claim), which the claim's history row names: a later holder's
// span links back to it.
func traceClaim(ctx context.Context, a Attempt, claim func(context.Context) (claim, error)) (claim, error) {
	ctx, span := tracer.Start(ctx, "payment.claim", attemptAttributes(a))
	defer span.End()
	c, err := claim(ctx)
	switch {
	case err != nil:
		span.SetStatus(codes.Error, ErrorCode(err))
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
