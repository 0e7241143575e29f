package webhook

import (
	"context"
	"time"
)

// Sizes of the retention cleanup: deliveries deleted per statement, and
// statements per pass, so that a large backlog is worked off over several
// passes instead of in one long burst.
const (
	cleanupBatchSize  = 500
	cleanupMaxBatches = 20
)

// clean forgets finished deliveries at once and then every CleanupInterval
// until ctx ends.
func (s *Service) clean(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.CleanupInterval)
	defer ticker.Stop()
	for {
		n, err := s.CleanOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			// An outage passes; the next pass tries again.
			s.log.Warn("webhook retention pass failed", "err", err)
		case n > 0:
			s.log.Info("webhook retention pass: forgot finished deliveries", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// CleanOnce deletes deliveries that were delivered or given up more than
// Retention ago, with their attempts, batch by batch (skipping rows locked
// by anyone else), and says how many deliveries it deleted. Pending
// deliveries are never deleted.
func (s *Service) CleanOnce(ctx context.Context) (int, error) {
	before := s.cfg.Now().Add(-s.cfg.Retention)
	total := 0
	for range cleanupMaxBatches {
		dbCtx, cancel := context.WithTimeout(ctx, dbTimeout)
		n, err := s.store.deleteFinished(dbCtx, before, cleanupBatchSize)
		cancel()
		total += n
		if err != nil || n < cleanupBatchSize {
			return total, err
		}
	}
	return total, nil
}
