package payment

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"chargeonce/history"
	"chargeonce/loop"
)

// CleanerConfig tunes a Cleaner. Zero values take the defaults.
type CleanerConfig struct {
	Interval  time.Duration // time between passes, default CleanupIntervalDefault
	BatchSize int           // attempts deleted per statement, default loop.BatchSizeDefault
	// MaxBatches bounds one pass. A pass that ends with more to delete (a
	// backlog) is followed by the next at once rather than after Interval,
	// so the cleaner keeps up with any rate of charges.
	MaxBatches int // default loop.MaxBatchesDefault
	// Passes is told of each pass Run finishes, with its RetentionResult
	// as the Result (a test signal); nil tells nobody.
	Passes *loop.Passes
}

// cleanupRestFactor paces the cleaner: after each full batch it rests this
// many times as long as the batch took, so it keeps a connection busy at
// most a quarter of the time and yields the database to charges, however
// large the backlog (bench's fresh-cleanup run measures the cost).
const cleanupRestFactor = 3

// CleanupIntervalDefault is the time between retention passes.
const CleanupIntervalDefault = time.Minute

func (c CleanerConfig) withDefaults() CleanerConfig {
	c.Interval = cmp.Or(c.Interval, CleanupIntervalDefault)
	c.BatchSize = cmp.Or(c.BatchSize, loop.BatchSizeDefault)
	c.MaxBatches = cmp.Or(c.MaxBatches, loop.MaxBatchesDefault)
	return c
}

// Cleaner forgets stored results of idempotency keys once they expire
// (Config.Retention after the outcome). It deletes finished attempts in small
// batches, oldest first by id up to the ids of a retention ago, skipping
// rows locked by anyone else, so it neither scans the table nor holds long
// locks nor blocks claims.
// PROCESSING attempts are never deleted, and charges are kept: they are the
// business record. A key used again after its result was forgotten starts a
// new attempt; orders stay protected by the one-payment-per-order rule.
type Cleaner struct {
	svc *Service
	cfg CleanerConfig
	log *slog.Logger
	// rest waits between batches (tests record it).
	rest func(ctx context.Context, d time.Duration)
}

// NewCleaner returns a Cleaner for svc's attempts, with svc's clock.
func NewCleaner(svc *Service, cfg CleanerConfig) *Cleaner {
	return &Cleaner{svc: svc, cfg: cfg.withDefaults(), log: svc.log.With("component", "retention"),
		rest: func(ctx context.Context, d time.Duration) { loop.Sleep(ctx, d) }}
}

// Run runs a pass at once, then the next at once while a backlog lasts and
// every Interval otherwise, until ctx ends.
func (c *Cleaner) Run(ctx context.Context) {
	loop.Runner{Name: "retention", Interval: c.cfg.Interval, Logger: c.log, Passes: c.cfg.Passes}.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		res, backlog, err := c.pass(ctx)
		if err == nil && res.Attempts > 0 {
			c.log.Info("retention pass: forgot expired idempotency keys", "deleted", res.Attempts)
		}
		return loop.Next{Now: backlog, Result: res}, err
	})
}

// RetentionResult counts what one retention pass did.
type RetentionResult struct {
	Attempts int // expired finished attempts deleted
	Events   int // sent outbox events deleted
	Sessions int // checkout sessions marked EXPIRED
	History  int // history rows forgotten with their key
}

// RunOnce deletes expired finished attempts, and outbox events sent more
// than Retention ago, batch by batch, and marks checkout sessions past
// their expiry EXPIRED (with their events); it says how many attempts it
// deleted.
func (c *Cleaner) RunOnce(ctx context.Context) (int, error) {
	res, _, err := c.pass(ctx)
	return res.Attempts, err
}

// pass is RunOnce, and says whether a backlog of attempts remains.
func (c *Cleaner) pass(ctx context.Context) (res RetentionResult, backlog bool, err error) {
	ctx, span := tracer.Start(ctx, "retention.pass")
	defer func() { endSpan(span, err) }()
	batches := loop.Batches{Size: c.cfg.BatchSize, Max: c.cfg.MaxBatches, RestFactor: cleanupRestFactor, Rest: c.rest}
	res.Attempts, backlog, err = batches.Run(ctx, c.svc.deleteExpired)
	if err != nil {
		return res, false, fmt.Errorf("delete expired attempts: %w", err)
	}
	res.Events, _, err = batches.Run(ctx, c.svc.deleteSentEvents)
	if err != nil {
		return res, false, fmt.Errorf("delete sent events: %w", err)
	}
	res.History, _, err = batches.Run(ctx, c.svc.deleteHistory)
	if err != nil {
		return res, false, fmt.Errorf("delete history: %w", err)
	}
	res.Sessions, _, err = batches.Run(ctx, c.svc.ExpireSessions)
	if err != nil {
		return res, false, fmt.Errorf("expire checkout sessions: %w", err)
	}
	if res.Sessions > 0 {
		c.log.Info("retention pass: expired unpaid checkout sessions", "expired", res.Sessions)
	}
	if res.Events > 0 {
		c.log.Info("retention pass: forgot sent events", "deleted", res.Events)
	}
	return res, backlog, nil
}

// deleteExpired forgets up to limit finished attempts whose result has expired.
func (s *Service) deleteExpired(ctx context.Context, limit int) (int, error) {
	n, err := s.store.deleteExpired(ctx, s.cfg.Now(), s.cfg.Retention, limit)
	s.metrics.RetentionDeleted.Add(float64(n))
	return n, err
}

// deleteHistory forgets up to limit history rows written more than
// Retention ago whose key has no attempt any more: a key's history lives
// as long as its result, and Retention at least.
func (s *Service) deleteHistory(ctx context.Context, limit int) (int, error) {
	n, err := history.Delete(ctx, s.store.pool, s.cfg.Now().Add(-s.cfg.Retention), limit)
	return n, interpretError(err)
}

// deleteSentEvents forgets up to limit outbox events sent more than
// Retention ago: they are on the broker, which keeps its own copy.
func (s *Service) deleteSentEvents(ctx context.Context, limit int) (int, error) {
	return s.store.deleteSentEvents(ctx, s.cfg.Now().Add(-s.cfg.Retention), limit)
}
