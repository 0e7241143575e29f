package payment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"chargeonce/sqlc"
)

// ReconcilerConfig tunes a Reconciler. Zero values take the defaults.
type ReconcilerConfig struct {
	// Interval is the time between passes.
	Interval time.Duration // default 5s
	// RedriveWindow is how long after its claim an attempt the provider has
	// never seen is sent again; after it, the attempt fails with
	// provider_unavailable.
	RedriveWindow time.Duration // default 10m
	// BatchSize is the most attempts one pass takes over.
	BatchSize int // default 100
}

func (c ReconcilerConfig) withDefaults() ReconcilerConfig {
	c.Interval = cmp.Or(c.Interval, 5*time.Second)
	c.RedriveWindow = cmp.Or(c.RedriveWindow, 10*time.Minute)
	c.BatchSize = cmp.Or(c.BatchSize, 100)
	return c
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
	return &Reconciler{svc: svc, cfg: cfg.withDefaults(), log: svc.log.With("component", "reconciler")}
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
	res := ReconcileResult{Taken: len(attempts)}
	for _, a := range attempts {
		switch r.reconcile(ctx, now, a) {
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
func (r *Reconciler) reconcile(ctx context.Context, now time.Time, a sqlc.ChargeAttempt) Status {
	log := r.log.With("idempotency_key", a.IdempotencyKey, "attempt_id", a.ID, "attempt", a.Attempt)
	m, err := r.svc.store.merchant(ctx, a.MerchantID)
	if err != nil {
		return r.leaveOpen(ctx, log, a, "could not load the merchant", err)
	}
	log = log.With("merchant", m.Name)
	pc, err := r.svc.provider.FindCharge(ctx, a.ProviderKey)
	if err != nil {
		return r.leaveOpen(ctx, log, a, "the provider lookup failed", err)
	}
	reason := "the provider has the charge"
	switch {
	case pc != nil:
	case now.Sub(a.CreatedAt) >= r.cfg.RedriveWindow:
		reason = "the provider never saw the charge and the redrive window has passed"
		pc = &ProviderCharge{FailureCode: "provider_unavailable",
			FailureMessage: "The card provider could not be reached; the card was not charged."}
	default:
		reason = "the provider never saw the charge; sent it again under the same provider key"
		got, err := r.svc.callProvider(ctx, m, a, false)
		if err != nil {
			return r.leaveOpen(ctx, log, a, "re-sent the charge, outcome still unknown", err)
		}
		pc = &got
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalizeTimeout)
	defer cancel()
	row, err := r.svc.finalize(writeCtx, a, *pc)
	if errors.Is(err, errFenced) {
		log.Info("reconcile: attempt was finalized by another holder; nothing to do")
		return StatusProcessing
	}
	if err != nil {
		return r.leaveOpen(ctx, log, a, "could not record the provider's answer", err)
	}
	status := Status(row.ChargeAttempt.Status)
	log.Info("reconcile: attempt finalized", "status", status, "reason", reason,
		"provider_charge_id", pc.ID, "failure_code", pc.FailureCode)
	return status
}

// leaveOpen logs why the attempt stays PROCESSING and hands it to the next
// pass at once, rather than when this pass's lease ends.
func (r *Reconciler) leaveOpen(ctx context.Context, log *slog.Logger, a sqlc.ChargeAttempt, reason string, err error) Status {
	log.Warn("reconcile: attempt stays PROCESSING", "reason", reason, "err", err)
	if err := r.svc.store.release(context.WithoutCancel(ctx), a, r.svc.cfg.Now()); err != nil {
		log.Warn("reconcile: could not release the lease", "err", err)
	}
	return StatusProcessing
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
