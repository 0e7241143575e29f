package payment

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
)

// batcher gathers the writes of one kind that concurrent requests make
// while they wait for a connection, so that they go to PostgreSQL
// together: one statement and one commit for all of them. Each write asks
// the pool for a connection, as it would alone; the first to get one
// takes every write of its kind still waiting (up to maxBatch) and makes
// them on it, and those it took stop waiting for a connection of their
// own. A write that gets a connection at once, as every write does while
// the pool has one idle, goes alone and waits for nobody: writes are
// batched only when they would have queued for a connection anyway, and
// only minBatch or more (fewer go one by one, each on the connection it
// gets: a batch of two cost fresh charges at concurrency 8 about a tenth
// of their throughput, bench/README.md).
//
// Each write in a batch keeps its own guarantee: the batch's statement
// commits all of them or none. When it fails (one write's unique
// violation or broken rule fails the whole statement), each write is
// made again on its own, so that each request gets its own answer and its
// own error, as without batching.
type batcher[In, Out any] struct {
	pool *pgxpool.Pool
	// one makes a single write on conn; many makes two or more in one
	// statement on conn, setting each one's out, and writes nothing when
	// it returns an error.
	one      func(ctx context.Context, conn *pgxpool.Conn, in In) (Out, error)
	many     func(ctx context.Context, conn *pgxpool.Conn, batch []*batched[In, Out]) error
	maxBatch int

	mu      sync.Mutex
	waiting []*batched[In, Out]
}

// batched is one request's write and, once written, its outcome.
type batched[In, Out any] struct {
	ctx context.Context
	in  In
	out Out
	err error
	// stopAcquire stops the write's wait for a connection once another's
	// batch took it (taken); done is closed once it is written.
	stopAcquire context.CancelFunc
	taken       bool
	done        chan struct{}
}

// minBatch is the fewest writes worth a batch's statement.
const minBatch = 3

func newBatcher[In, Out any](pool *pgxpool.Pool, maxBatch int,
	one func(ctx context.Context, conn *pgxpool.Conn, in In) (Out, error),
	many func(ctx context.Context, conn *pgxpool.Conn, batch []*batched[In, Out]) error) *batcher[In, Out] {
	return &batcher[In, Out]{pool: pool, one: one, many: many, maxBatch: maxBatch}
}

// acquire takes a connection of pool for a write, before anything is
// sent: a failure to get one (the database is away, the pool exhausted
// until ctx is done) is known to have sent nothing (db.ErrNotSent).
func acquire(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", db.ErrNotSent, err)
	}
	return conn, nil
}

// write makes in's write, alone or with the writes waiting beside it,
// failing as acquire does when it gets no connection. When ctx is done
// while another's batch carries the write, it returns ctx's error, and
// the write may still land, as a statement cancelled after it was sent
// may.
func (b *batcher[In, Out]) write(ctx context.Context, in In) (Out, error) {
	acquireCtx, stop := context.WithCancel(ctx)
	defer stop()
	w := &batched[In, Out]{ctx: ctx, in: in, stopAcquire: stop, done: make(chan struct{})}
	b.mu.Lock()
	b.waiting = append(b.waiting, w)
	b.mu.Unlock()

	conn, acquireErr := acquire(acquireCtx, b.pool)
	b.mu.Lock()
	if w.taken {
		b.mu.Unlock()
		if conn != nil {
			conn.Release()
		}
		select {
		case <-w.done:
			return w.out, w.err
		case <-ctx.Done():
			var zero Out
			return zero, ctx.Err()
		}
	}
	if acquireErr != nil {
		b.removeLocked(w)
		b.mu.Unlock()
		var zero Out
		return zero, acquireErr
	}
	batch := b.takeLocked(w)
	b.mu.Unlock()
	defer conn.Release()
	b.writeBatch(conn, batch)
	return w.out, w.err
}

// takeLocked takes w and the writes waiting beside it, up to maxBatch
// and when they make minBatch, off the waiting list, and stops their
// waits for a connection.
func (b *batcher[In, Out]) takeLocked(w *batched[In, Out]) []*batched[In, Out] {
	b.removeLocked(w)
	n := min(len(b.waiting), b.maxBatch-1)
	if n < minBatch-1 {
		n = 0
	}
	batch := append([]*batched[In, Out]{w}, b.waiting[:n]...)
	b.waiting = append(b.waiting[:0:0], b.waiting[n:]...)
	for _, other := range batch[1:] {
		other.taken = true
		other.stopAcquire()
	}
	return batch
}

func (b *batcher[In, Out]) removeLocked(w *batched[In, Out]) {
	for i, x := range b.waiting {
		if x == w {
			b.waiting = append(b.waiting[:i:i], b.waiting[i+1:]...)
			return
		}
	}
}

// writeBatch makes batch's writes on conn; batch[0]'s is the caller's.
func (b *batcher[In, Out]) writeBatch(conn *pgxpool.Conn, batch []*batched[In, Out]) {
	defer func() {
		for _, w := range batch[1:] {
			close(w.done)
		}
	}()
	if len(batch) == 1 {
		w := batch[0]
		w.out, w.err = b.one(w.ctx, conn, w.in)
		return
	}
	ctx, cancel := batchContext(batch)
	defer cancel()
	if err := b.many(ctx, conn, batch); err == nil {
		return
	}
	for _, w := range batch {
		w.out, w.err = b.one(ctx, conn, w.in)
	}
}

// batchContext is what a batch's statement runs under: no one request's
// cancellation stops it, since it is everyone's; it keeps the first one's
// values (its logger and trace) and has the latest of their deadlines
// (none when one of them has none).
func batchContext[In, Out any](batch []*batched[In, Out]) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(batch[0].ctx)
	var last time.Time
	for _, w := range batch {
		d, ok := w.ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(ctx, last)
}
