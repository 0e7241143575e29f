package history

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

func entry(m uuid.UUID, key, typ string, at time.Time) Entry {
	return Entry{Key: Key{MerchantID: m, Kind: "charge", IdempotencyKey: key}, At: at, Type: typ,
		Source: Source{RequestID: "r-" + at.Format("05.000"), Instance: "i-1"}}
}

func TestRecorder_CountsReplaysAcrossWritesIntoOneRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	rec := NewRecorder(pool, Config{Instance: "i-1", FlushInterval: time.Hour})
	m := uuid.New()
	start := time.Now().UTC().Truncate(time.Millisecond)

	// Many writers at once, over two writes.
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Go(func() { rec.Count(entry(m, "k", Replayed, start.Add(time.Duration(i)*time.Millisecond))) })
	}
	wg.Wait()
	require.NoError(t, rec.Flush(ctx))
	rec.Add(entry(m, "k", Replayed, start.Add(-time.Second)), entry(m, "k", Processing, start), entry(m, "k", Claimed, start))
	require.NoError(t, rec.Flush(ctx))

	events, err := List(ctx, pool, m, "charge", "k")
	require.NoError(t, err)
	require.Len(t, events, 3)
	byType := map[string]Event{}
	for _, e := range events {
		byType[e.Type] = e
	}
	require.Equal(t, 501, byType[Replayed].Count)
	require.Equal(t, start.Add(-time.Second), byType[Replayed].At.UTC(), "the first replay's time is the row's")
	require.Equal(t, start.Add(499*time.Millisecond), byType[Replayed].LastAt.UTC())
	require.Equal(t, 1, byType[Processing].Count)
	require.Equal(t, 1, byType[Claimed].Count)
	require.Equal(t, "i-1", byType[Claimed].Instance)
}

func TestRecorder_DatabaseAway_KeepsRowsForTheNextWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	rec := NewRecorder(pool, Config{Instance: "i-1", FlushInterval: time.Hour})
	m := uuid.New()
	now := time.Now()
	rec.Add(entry(m, "k", Claimed, now), entry(m, "k", Replayed, now))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, rec.Flush(canceled), "a write that cannot happen fails")
	rec.Add(entry(m, "k", Replayed, now.Add(time.Millisecond)))
	require.NoError(t, rec.Flush(ctx))
	events, err := List(ctx, pool, m, "charge", "k")
	require.NoError(t, err)
	require.Len(t, events, 2, "nothing lost, nothing written twice")
	for _, e := range events {
		if e.Type == Replayed {
			require.Equal(t, 2, e.Count)
		}
	}
}

func TestRecorder_Bounded_DropsTheOldestNeverBlocks(t *testing.T) {
	t.Parallel()
	rec := NewRecorder(nil, Config{MaxBuffered: 3})
	m := uuid.New()
	for i := range 5 {
		rec.Add(entry(m, "k", Mismatch, time.Unix(int64(i), 0)))
	}
	require.Len(t, rec.rows, 3)
	require.Equal(t, int64(2), rec.rows[0].At.Unix(), "the oldest went first")
	require.Equal(t, 2, rec.dropped)
}

func TestRecorder_Run_WritesOnItsIntervalAndOnceMoreWhenItStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	rec := NewRecorder(pool, Config{Instance: "i-1", FlushInterval: 20 * time.Millisecond})
	m := uuid.New()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rec.Run(runCtx) }()
	rec.Add(entry(m, "k", Claimed, time.Now()))
	require.Eventually(t, func() bool {
		events, err := List(ctx, pool, m, "charge", "k")
		return err == nil && len(events) == 1
	}, 5*time.Second, 10*time.Millisecond, "written on the interval")

	rec.Add(entry(m, "k", Mismatch, time.Now()))
	stop()
	<-done
	events, err := List(ctx, pool, m, "charge", "k")
	require.NoError(t, err)
	require.Len(t, events, 2, "the last write at the stop")
}

func TestNilRecorder_RecordsNothing(t *testing.T) {
	t.Parallel()
	var rec *Recorder
	rec.Add(Entry{})
	rec.Count(Entry{})
	require.NoError(t, rec.Flush(context.Background()))
	require.Empty(t, rec.Instance())
	rec.Run(context.Background())
}
