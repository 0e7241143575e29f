package payment

import (
	"cmp"
	"context"
	"fmt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"sync"

	"chargeonce/loop"
)

// ReconcilerConfig tunes a Reconciler. Zero values take the defaults. The
// interval, the lease, the redrive window and the clock are the Service's.
type ReconcilerConfig struct {
	// BatchSize is the most attempts one pass takes over. They are worked on
	// at once, each within what is left of its lease, so that no lease taken
	// by a pass runs out before the pass has worked its attempt.
	BatchSize int // default ReconcilerBatchSizeDefault
	// Passes is told of each pass Run finishes, with its ReconcileResult as
	// the Result (a test signal); nil tells nobody.
	Passes *loop.Passes
}

// ReconcilerBatchSizeDefault is how many attempts a pass takes over.
const ReconcilerBatchSizeDefault = 16

// Reconciler drives stuck attempts to a final status: PROCESSING attempts
// whose lease has ended, because their holder died, or the provider's
// answer was lost, or the answer could not be recorded. It asks the
// provider by our provider key and records what the provider knows; an
// attempt the provider never saw is sent again under the same key (the
// provider deduplicates) until the redrive window has passed. Every server
// instance runs one; they never work on the same attempt at once.
type Reconciler struct {
	svc *Service
	cfg ReconcilerConfig
	log *slog.Logger
}

// NewReconciler returns a Reconciler for svc's attempts, with svc's clock,
// lease, interval and provider.
func NewReconciler(svc *Service, cfg ReconcilerConfig) *Reconciler {
	cfg.BatchSize = cmp.Or(cfg.BatchSize, ReconcilerBatchSizeDefault)
	return &Reconciler{svc: svc, cfg: cfg, log: svc.log.With("component", "reconciler")}
}

// ReconcileResult counts what one pass did.
type ReconcileResult struct {
	Taken     int // stuck attempts taken over
	Succeeded int // finalized SUCCEEDED
	Failed    int // finalized FAILED
	Open      int // still PROCESSING: outcome still unknown, for a later pass
}

// Run runs a pass at once and then every ReconcileInterval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	loop.Runner{Name: "reconcile", Interval: r.svc.cfg.ReconcileInterval, Logger: r.log, Passes: r.cfg.Passes}.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		res, err := r.RunOnce(ctx)
		if err == nil && res.Taken > 0 {
			r.log.Info("reconcile pass", "taken", res.Taken, "succeeded", res.Succeeded, "failed", res.Failed, "open", res.Open)
		}
		return loop.Next{Result: res}, err
	})
}

// RunOnce takes over a batch of stuck attempts and reconciles them side by
// side.
func (r *Reconciler) RunOnce(ctx context.Context) (_ ReconcileResult, err error) {
	ctx, span := tracer.Start(ctx, "reconciler.pass")
	defer func() { endSpan(span, err) }()
	attempts, err := r.svc.takeStuck(ctx, r.cfg.BatchSize)
	if err != nil {
		return ReconcileResult{}, fmt.Errorf("take stuck attempts: %w", err)
	}
	res := ReconcileResult{Taken: len(attempts)}
	span.SetAttributes(attribute.Int("chargeonce.taken", len(attempts)))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, a := range attempts {
		wg.Go(func() {
			status := r.svc.reconcile(ctx, r.log, a)
			mu.Lock()
			defer mu.Unlock()
			switch status {
			case StatusSucceeded:
				res.Succeeded++
			case StatusFailed:
				res.Failed++
			default:
				res.Open++
			}
		})
	}
	wg.Wait()
	// Then what is owed back to shoppers.
	r.svc.giveBackOwed(ctx, r.log, r.cfg.BatchSize)
	return res, ctx.Err()
}

// reconcile settles one attempt that the reconciler holds, within what is
// left of its lease, and says where it stands.
//
// Its span (reconciler.attempt) links back to the span of the request
// that claimed a, so that a payment its request left unfinished leads from
// the checkout's trace to the reconciler's.
func (s *Service) reconcile(ctx context.Context, log *slog.Logger, a Attempt) Status {
	opts := []trace.SpanStartOption{trace.WithAttributes(attemptAttributes(a)...)}
	if claimed, err := s.store.claimSpan(ctx, a); err == nil && claimed.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: claimed,
			Attributes: []attribute.KeyValue{attribute.String("chargeonce.link", "claimed by")}}))
	}
	ctx, span := tracer.Start(ctx, "reconciler.attempt", opts...)
	defer span.End()
	// The last tenth of the lease is kept free of work, for the write that
	// releases the lease when the work ran out of time.
	ctx, cancel := context.WithTimeout(ctx, a.LockedUntil.Sub(s.cfg.Now())*9/10)
	defer cancel()
	// An idempotency key means something only within its merchant's scope.
	m, err := s.store.merchant(ctx, a.MerchantID)
	if err != nil {
		log := attemptLogger(log, Merchant{}, a)
		log.WarnContext(ctx, "attempt stays PROCESSING", "reason", "could not load the merchant", "err", err)
		s.release(ctx, log, a, releaseBudget, "could not load the merchant")
		return StatusProcessing
	}
	st, done := s.settle(ctx, attemptLogger(log, m, a), m, a, byReconciler)
	if st != finalized {
		return StatusProcessing
	}
	return done.Status
}
