package payment

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"chargeonce/db/dbtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A backlog of expired keys is worked off pass after pass, not one pass per
// Interval, and the cleaner rests after every full batch.
func TestCleaner_Backlog_IsWorkedOffAtOnceWithRestsBetweenBatches(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Retention: time.Hour})
	ctx := context.Background()
	for i := range 25 {
		_, err := b.svc.ChargeCard(ctx, b.merchant, fmt.Sprintf("k-%d", i), visa(100))
		require.NoError(t, err)
	}
	b.clock.Advance(2 * time.Hour)

	cleaner := NewCleaner(b.svc, CleanerConfig{Interval: time.Hour, BatchSize: 5, MaxBatches: 2})
	var mu sync.Mutex
	var rests []time.Duration
	cleaner.rest = func(_ context.Context, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		rests = append(rests, d)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cleaner.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, []int64{0}, dbtest.Query[int64](c, b.pool, "SELECT count(*) FROM charge_attempts"))
		// The rest after the last batch follows its commit.
		mu.Lock()
		defer mu.Unlock()
		require.GreaterOrEqual(c, len(rests), 5)
	}, 10*time.Second, 20*time.Millisecond, "three passes of at most 10 keys each, without waiting an hour between them")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, rests, 5, "one rest after each of the five full batches")
	for _, d := range rests {
		require.Positive(t, d)
	}
}
