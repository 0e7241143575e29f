package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// records keeps what a runner logs.
type records struct {
	mu  sync.Mutex
	got []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) levels() []slog.Level {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ls []slog.Level
	for _, rec := range r.got {
		ls = append(ls, rec.Level)
	}
	return ls
}

var errOutage = errors.New("the database is away")

// TestRun_AnOutageIsAWarningAndAnythingElseAnError: the policy for failed
// passes, with the backoff growing between them.
func TestRun_AnOutageIsAWarningAndAnythingElseAnError(t *testing.T) {
	t.Parallel()
	var logged records
	ctx, cancel := context.WithCancel(context.Background())
	var starts []time.Time
	errs := []error{errOutage, errOutage, fmt.Errorf("pass: %w", errors.New("a bug")), nil}
	Runner{Name: "test", Interval: time.Hour, Backoff: Backoff{Min: 10 * time.Millisecond, Max: 40 * time.Millisecond},
		Outage: func(err error) bool { return errors.Is(err, errOutage) }, Logger: slog.New(&logged)}.Run(ctx,
		func(context.Context) (Next, error) {
			starts = append(starts, time.Now())
			err := errs[len(starts)-1]
			if err == nil {
				cancel()
			}
			return Next{}, err
		})
	require.Len(t, starts, 4, "each failed pass is followed by another, not by an hour's wait")
	require.Equal(t, []slog.Level{slog.LevelWarn, slog.LevelWarn, slog.LevelError}, logged.levels())
	require.GreaterOrEqual(t, starts[1].Sub(starts[0]), 10*time.Millisecond)
	require.GreaterOrEqual(t, starts[2].Sub(starts[1]), 20*time.Millisecond, "the wait doubles")
}

func TestRun_WakeAndBacklogRunThePassAtOnce(t *testing.T) {
	t.Parallel()
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	passes := 0
	Runner{Name: "test", Interval: time.Hour, Wake: wake}.Run(ctx, func(context.Context) (Next, error) {
		passes++
		switch passes {
		case 1:
			return Next{Now: true}, nil // a backlog: again at once
		case 2:
			Signal(wake)
			Signal(wake) // one pending wake covers both
			return Next{Rest: time.Millisecond}, nil
		case 3:
			cancel()
		}
		return Next{}, nil
	})
	require.Equal(t, 3, passes)
	require.ErrorIs(t, ctx.Err(), context.Canceled, "it stopped because the pass ended ctx, not by the timeout")
}

func TestRun_StopsWhileItWaits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var signal Passes
	first := signal.Expect(1, nil) // before the runner starts: its first pass cannot go unseen
	passes := 0
	go func() {
		defer close(done)
		Runner{Name: "test", Interval: time.Hour, Passes: &signal}.Run(ctx, func(context.Context) (Next, error) { passes++; return Next{}, nil })
	}()
	wait(t, first)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return once ctx ended")
	}
	require.Equal(t, 1, passes, "one pass, then the hour's wait, which ctx ended")
	require.Equal(t, 1, signal.Count())
}

// TestPasses_TellWhatEachPassCameTo: a test waits for passes that finish
// after it asks, with their results, and only for those it wants.
func TestPasses_TellWhatEachPassCameTo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var signal Passes
	failing := errors.New("away")
	wake := make(chan struct{}, 1)
	results := make(chan Next)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Runner{Name: "test", Interval: time.Hour, Wake: wake, Backoff: Backoff{Min: time.Millisecond, Max: time.Millisecond},
			Passes: &signal}.Run(ctx, func(context.Context) (Next, error) {
			next := <-results
			if next.Result == "fail" {
				return next, failing
			}
			return next, nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })

	all, failed := signal.Expect(3, nil), signal.Expect(1, func(p Pass) bool { return p.Err != nil })
	results <- Next{Result: 1}
	Signal(wake)
	results <- Next{Result: "fail"} // tried again after the backoff
	got := wait(t, failed)
	require.ErrorIs(t, got[0].Err, failing)
	require.Equal(t, "fail", got[0].Next.Result)

	results <- Next{Result: 3}
	got = wait(t, all)
	require.Len(t, got, 3)
	require.Equal(t, []any{1, "fail", 3}, []any{got[0].Next.Result, got[1].Next.Result, got[2].Next.Result})
	require.Equal(t, 3, signal.Count())

	// A wait that times out says how far it got, and stops counting.
	short, stop := context.WithTimeout(ctx, 10*time.Millisecond)
	defer stop()
	got, err := signal.Wait(short, 1, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Empty(t, got)
	signal.mu.Lock()
	defer signal.mu.Unlock()
	require.Empty(t, signal.expected, "a wait given up is forgotten")
}

// wait waits for the passes e expects, for at most a minute.
func wait(t *testing.T, e *Expected) []Pass {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := e.Wait(ctx)
	require.NoError(t, err)
	return got
}

func TestBatches_StopAtAShortBatchOrAtMax_RestingAfterFullOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rests []time.Duration
	b := Batches{Size: 10, Max: 3, RestFactor: 3, Rest: func(_ context.Context, d time.Duration) { rests = append(rests, d) }}

	left := 25
	del := func(_ context.Context, limit int) (int, error) {
		n := min(limit, left)
		left -= n
		return n, nil
	}
	n, full, err := b.Run(ctx, del)
	require.NoError(t, err)
	require.Equal(t, 25, n)
	require.False(t, full)
	require.Len(t, rests, 2, "a rest after each full batch, none after the short one")

	left, rests = 100, nil
	n, full, err = b.Run(ctx, del)
	require.NoError(t, err)
	require.Equal(t, 30, n)
	require.True(t, full, "a backlog remains")
	require.Len(t, rests, 3)

	failing := errors.New("gone")
	n, full, err = Batches{}.Run(ctx, func(context.Context, int) (int, error) { return 0, failing })
	require.ErrorIs(t, err, failing)
	require.Zero(t, n)
	require.False(t, full)
}
