package payment

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"chargeonce/metrics"
	"chargeonce/sqlc"
)

// ReconcilerConfig tunes a Reconciler. Zero values take the defaults. The
// lease, the redrive window and the clock are the Service's.
type ReconcilerConfig struct {
	// Interval is the time between passes.
	Interval time.Duration // default: the Service's ReconcileInterval
	// BatchSize is the most attempts one pass takes over.
	BatchSize int // default 100
}

// Reconciler drives abandoned attempts to a final status: PROCESSING
// attempts whose lease has expired, because their holder died, or the
// provider's answer was lost, or the answer could not be recorded. It asks the
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
// lease and provider.
func NewReconciler(svc *Service, cfg ReconcilerConfig) *Reconciler {
	cfg.Interval = cmp.Or(cfg.Interval, svc.cfg.ReconcileInterval)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 100)
	return &Reconciler{svc: svc, cfg: cfg, log: svc.log.With("component", "reconciler")}
}

// ReconcileResult counts what one pass did.
type ReconcileResult struct {
	Taken     int // abandoned attempts taken over
	Succeeded int // finalized SUCCEEDED
	Failed    int // finalized FAILED
	Open      int // still PROCESSING: outcome still unknown, for a later pass
}

// Run runs a pass every Interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	runEvery(ctx, r.cfg.Interval, func(ctx context.Context) {
		res, err := r.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("reconcile pass failed", "err", err)
		} else if res.Taken > 0 {
			r.log.Info("reconcile pass", "taken", res.Taken, "succeeded", res.Succeeded, "failed", res.Failed, "open", res.Open)
		}
	})
}

// RunOnce takes over the attempts whose lease has expired and reconciles each.
func (r *Reconciler) RunOnce(ctx context.Context) (ReconcileResult, error) {
	now := r.svc.cfg.Now()
	attempts, err := r.svc.store.takeAbandoned(ctx, now, now.Add(r.svc.cfg.Lease), r.cfg.BatchSize)
	if err != nil {
		return ReconcileResult{}, fmt.Errorf("take abandoned attempts: %w", err)
	}
	r.svc.metrics.ReconcilerTakeovers.Add(float64(len(attempts)))
	res := ReconcileResult{Taken: len(attempts)}
	for _, a := range attempts {
		switch r.reconcile(ctx, a) {
		case StatusSucceeded:
			res.Succeeded++
		case StatusFailed:
			res.Failed++
		default:
			res.Open++
		}
	}
	return res, ctx.Err()
}

// reconcile settles one attempt that this pass holds, and says where it stands.
func (r *Reconciler) reconcile(ctx context.Context, a sqlc.ChargeAttempt) Status {
	// An idempotency key means something only within its merchant's scope.
	log := r.log.With("merchant_id", a.MerchantID, "idempotency_key", a.IdempotencyKey, "attempt_id", a.ID, "attempt", a.Attempt)
	m, err := r.svc.store.merchant(ctx, a.MerchantID)
	if err != nil {
		r.svc.leaveOpen(ctx, log, a, "could not load the merchant", err)
		return StatusProcessing
	}
	st := r.svc.settle(ctx, log.With("merchant", m.Name), m, a, metrics.ByReconciler)
	if !st.final {
		return StatusProcessing
	}
	return Status(st.row.ChargeAttempt.Status)
}

// runEvery calls fn every interval until ctx ends. A pass that runs long
// delays the next one rather than overlapping it.
func runEvery(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			fn(ctx)
		}
	}
}
