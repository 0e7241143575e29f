package payment

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/history"
	"chargeonce/tracing/tracingtest"
)

func TestTracing_ReconcilerFinishes_ItsSpanLinksToTheClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	rec := history.NewRecorder(b.pool, history.Config{Instance: "i-1", FlushInterval: time.Hour})
	b.svc.cfg.History, b.svc.store.hist = rec, rec
	tr := tracingtest.Watch()
	ctx := tr.Context(context.Background())

	// The request claims and dies before the provider: only its claim's
	// span and history row remain.
	a := newChargeAttempt(b.merchant, "k", visa(500), b.clock.Now(), b.svc.cfg.Lease, b.svc.cfg.Retention)
	c, err := traceClaim(ctx, a, func(ctx context.Context) (claim, error) { return b.svc.store.claim(ctx, a, SessionMaxAttemptsDefault) })
	require.NoError(t, err)
	require.Equal(t, claimedByUs, c.outcome)
	b.clock.AdvancePast(c.attempt.LockedUntil)

	res, err := NewReconciler(b.svc, ReconcilerConfig{}).RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 1, Succeeded: 1}, res)

	spans := tr.Spans()
	require.Len(t, spans["payment.claim"], 1)
	claimSpan := spans["payment.claim"][0].SpanContext()
	require.Len(t, spans["reconciler.attempt"], 1, "the reconciler's span links to the claim's trace")
	attempt := spans["reconciler.attempt"][0]
	require.NotEqual(t, tr.ID, attempt.SpanContext().TraceID(), "a trace of its own")
	require.Len(t, attempt.Links(), 1)
	require.Equal(t, claimSpan.TraceID(), attempt.Links()[0].SpanContext.TraceID())
	require.Equal(t, claimSpan.SpanID(), attempt.Links()[0].SpanContext.SpanID(), "to the claim's very span")
}
