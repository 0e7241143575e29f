package webhook

import (
	"context"

	"chargeonce/loop"
)

// clean forgets finished deliveries at once and then every CleanupInterval
// until ctx ends.
func (s *Service) clean(ctx context.Context) {
	loop.Runner{Name: "webhook retention", Interval: s.cfg.CleanupInterval, Logger: s.log, Passes: s.cfg.RetentionPasses}.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		n, err := s.CleanOnce(ctx)
		if err == nil && n > 0 {
			s.log.Info("webhook retention pass: forgot finished deliveries", "deleted", n)
		}
		return loop.Next{Result: n}, err
	})
}

// CleanOnce deletes deliveries that were delivered or given up more than
// Retention ago, with their attempts, batch by batch (skipping rows locked
// by anyone else), and says how many deliveries it deleted. Pending
// deliveries are never deleted.
func (s *Service) CleanOnce(ctx context.Context) (int, error) {
	before := s.cfg.Now().Add(-s.cfg.Retention)
	n, _, err := loop.Batches{}.Run(ctx, func(ctx context.Context, limit int) (int, error) {
		dbCtx, cancel := context.WithTimeout(ctx, dbTimeout)
		defer cancel()
		return s.store.deleteFinished(dbCtx, before, limit)
	})
	return n, err
}
