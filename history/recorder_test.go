package history

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// entry is an entry of type typ at at about the attempt of m's key; the
// attempt need not exist for the recorder.
func entry(m uuid.UUID, key, typ string, at time.Time) Entry {
	return Entry{Key: Key{MerchantID: m, Kind: "charge", IdempotencyKey: key, AttemptID: attemptOf(m, key)}, At: at, Type: typ,
		Source: Source{RequestID: "r-" + at.Format("05.000"), Instance: "i-1"}}
}

// attemptOf is the attempt of m's key in these tests.
func attemptOf(m uuid.UUID, key string) uuid.UUID { return uuid.NewSHA1(m, []byte(key)) }

// read is what the database holds of the attempt of m's key, by type:
// each row's entries, and its counted rows.
func read(t *testing.T, pool *pgxpool.Pool, m uuid.UUID, key string) map[string]Event {
	t.Helper()
	ctx := context.Background()
	out := map[string]Event{}
	for _, raw := range dbtest.Query[[]byte](t, pool, "SELECT entries FROM attempt_history WHERE attempt_id = $1", attemptOf(m, key)) {
		var entries []entryJSON
		require.NoError(t, json.Unmarshal(raw, &entries))
		for _, e := range entries {
			out[e.Type] = Event{At: e.At, Type: e.Type, Count: 1}
		}
	}
	rows, err := pool.Query(ctx, "SELECT type, count, first_at, last_at, request_id FROM attempt_counts WHERE attempt_id = $1", attemptOf(m, key))
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var e Event
		require.NoError(t, rows.Scan(&e.Type, &e.Count, &e.At, &e.LastAt, &e.RequestID))
		out[e.Type] = e
	}
	require.NoError(t, rows.Err())
	return out
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

	byType := read(t, pool, m, "k")
	require.Len(t, byType, 3)
	require.Equal(t, 501, byType[Replayed].Count)
	require.Equal(t, start.Add(-time.Second), byType[Replayed].At.UTC(), "the first replay's time is the row's")
	require.Equal(t, "r-"+start.Add(-time.Second).Format("05.000"), byType[Replayed].RequestID, "and its request")
	require.Equal(t, start.Add(499*time.Millisecond), byType[Replayed].LastAt.UTC())
	require.Equal(t, 1, byType[Processing].Count)
	require.Equal(t, 1, byType[Claimed].Count)
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
	got := read(t, pool, m, "k")
	require.Len(t, got, 2, "nothing lost, nothing written twice")
	require.Equal(t, 2, got[Replayed].Count)
	require.Equal(t, 1, got[Claimed].Count)
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
	require.Eventually(t, func() bool { return len(read(t, pool, m, "k")) == 1 }, 5*time.Second, 10*time.Millisecond, "written on the interval")

	rec.Add(entry(m, "k", Mismatch, time.Now()))
	stop()
	<-done
	require.Len(t, read(t, pool, m, "k"), 2, "the last write at the stop")
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
