// Package loop runs chargeonce's background jobs, in the manner of River's
// maintenance services: each job is a pass (its RunOnce) that a Runner
// calls at once and then again every Interval, or as soon as something
// wakes it, until its context ends; the wait between passes ends with the
// context. The policy for a pass that fails is written here once: an outage
// (the database or the broker away, which passes) is logged as a warning
// and the pass is tried again after a backoff; any other error is logged as
// an error, since it is a bug. The reconciler, the retention cleaners, the
// webhook worker, the outbox relay and the re-check of open streams all run
// on it. A Runner tells a test of each pass it finishes (Passes), so that
// tests wait for passes rather than sleep.
package loop

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"chargeonce/db"
)

// Defaults of the retention cleaners' batches (Batches): rows deleted per
// statement, and statements per pass, so that a large backlog is worked off
// over several passes instead of in one long burst.
const (
	BatchSizeDefault  = 500
	MaxBatchesDefault = 20
)

// Runner runs one job's passes.
type Runner struct {
	// Name names the job in the log ("reconciler", "relay", …).
	Name string
	// Interval is the longest wait between two passes.
	Interval time.Duration
	// Wake, when set, starts the next pass at once when it receives: a
	// notification that there is work.
	Wake <-chan struct{}
	// Backoff is the wait after a failed pass: Min first, doubling up to
	// Max, and back to Min after a pass that succeeds. Zero waits Interval.
	Backoff Backoff
	// Outage says whether a failed pass met an outage; default
	// db.IsUnavailable.
	Outage func(error) bool
	Logger *slog.Logger
	// Passes, when set, is told of every pass the runner finishes (its
	// test signal); nil tells nobody.
	Passes *Passes
}

// Backoff bounds the waits after failed passes.
type Backoff struct{ Min, Max time.Duration }

// Next is what a pass asks of its runner, and what it did.
type Next struct {
	// Now runs the next pass at once: there is a backlog.
	Now bool
	// Rest waits this long before the runner waits for the next pass as
	// usual, so that work gathers into one pass rather than many.
	Rest time.Duration
	// Result is what the pass did, in its job's terms (a count, a result
	// struct): the runner only hands it on to Passes, for a test to read.
	Result any
}

// Run calls pass until ctx ends.
func (r Runner) Run(ctx context.Context, pass func(context.Context) (Next, error)) {
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	outage := r.Outage
	if outage == nil {
		outage = db.IsUnavailable
	}
	var backoff time.Duration
	for ctx.Err() == nil {
		next, err := pass(ctx)
		r.Passes.report(Pass{Next: next, Err: err})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			level := slog.LevelError
			if outage(err) {
				level = slog.LevelWarn
			}
			wait := r.Interval
			if r.Backoff.Min > 0 {
				backoff = min(max(2*backoff, r.Backoff.Min), r.Backoff.Max)
				wait = backoff
			}
			log.Log(ctx, level, r.Name+" pass failed", "err", err, "retry_in", wait)
			Sleep(ctx, wait)
			continue
		}
		backoff = 0
		if next.Now {
			continue
		}
		if next.Rest > 0 && !Sleep(ctx, next.Rest) {
			return
		}
		r.wait(ctx)
	}
}

// wait waits for Interval, a wake, or the end of ctx.
func (r Runner) wait(ctx context.Context) {
	t := time.NewTimer(r.Interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-r.Wake:
	}
}

// Sleep waits for d or until ctx ends, and reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Batches says how a retention cleaner deletes: Size rows a statement, at
// most Max statements a pass, and after each full batch a rest of
// RestFactor times as long as the batch took (0: none), so that a
// backlog's deletes keep a connection busy for a share of the time only.
// Zero values take the defaults.
type Batches struct {
	Size, Max  int
	RestFactor float64
	// Rest waits the rests; default Sleep (tests record it).
	Rest func(ctx context.Context, d time.Duration)
}

// Run runs del, which deletes up to limit rows and says how many it
// deleted, batch by batch until a batch comes back short or fails, or Max
// batches ran. It says how many rows it deleted in all, and whether the
// last batch was full: a backlog remains.
func (b Batches) Run(ctx context.Context, del func(ctx context.Context, limit int) (int, error)) (deleted int, full bool, err error) {
	size, most := cmp.Or(b.Size, BatchSizeDefault), cmp.Or(b.Max, MaxBatchesDefault)
	rest := b.Rest
	if rest == nil {
		rest = func(ctx context.Context, d time.Duration) { Sleep(ctx, d) }
	}
	for range most {
		start := time.Now()
		n, err := del(ctx, size)
		deleted += n
		if err != nil || n < size {
			return deleted, false, err
		}
		if b.RestFactor > 0 {
			rest(ctx, time.Duration(b.RestFactor*float64(time.Since(start))))
		}
	}
	return deleted, true, ctx.Err()
}

// Signal wakes a runner whose Wake is c, without waiting: one pending wake
// is enough.
func Signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
