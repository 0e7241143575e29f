package history

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of the recorder.
const (
	// FlushIntervalDefault is how often a recorder writes the rows it
	// gathered; CountIntervalDefault how often it adds its counts of
	// replays and PROCESSING answers, which change a row of each attempt
	// replayed: rarely, so that a storm of replays costs next to no write.
	FlushIntervalDefault = 200 * time.Millisecond
	CountIntervalDefault = 5 * time.Second
	// MaxBufferedDefault bounds the rows a recorder holds while the
	// database is away; past it the oldest are dropped (and counted in the
	// log), never the ledger's.
	MaxBufferedDefault = 100_000
	// flushTimeout bounds one write, and the last one at shutdown.
	flushTimeout = 5 * time.Second
)

// Config configures a Recorder; zero values take the defaults.
type Config struct {
	// Instance names this chargeonce instance in the rows it writes.
	Instance      string
	FlushInterval time.Duration
	CountInterval time.Duration
	MaxBuffered   int
	Logger        *slog.Logger
}

// Recorder gathers the rows that ride in no write of the ledger's, and
// writes them in batches: every FlushInterval, and once more when Run
// ends. A nil *Recorder records nothing, for the tests and tools that do
// without.
type Recorder struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger

	mu      sync.Mutex
	rows    []Entry
	counts  map[countKey]*counted
	dropped int
}

// countKey is what a counted row is counted by: an attempt, a type.
type countKey struct {
	attempt uuid.UUID
	typ     string
}

// counted is a counted row gathering: its first request, its count and
// its last.
type counted struct {
	first Entry
	n     int
	last  time.Time
}

// NewRecorder makes a recorder that writes to pool.
func NewRecorder(pool *pgxpool.Pool, cfg Config) *Recorder {
	cfg.FlushInterval = cmp.Or(cfg.FlushInterval, FlushIntervalDefault)
	cfg.CountInterval = cmp.Or(cfg.CountInterval, CountIntervalDefault)
	cfg.MaxBuffered = cmp.Or(cfg.MaxBuffered, MaxBufferedDefault)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{pool: pool, cfg: cfg, log: log, counts: map[countKey]*counted{}}
}

// Instance is the name this recorder's instance writes its rows under; ""
// for a nil recorder.
func (r *Recorder) Instance() string {
	if r == nil {
		return ""
	}
	return r.cfg.Instance
}

// Source is ctx's request and trace, written by this instance.
func (r *Recorder) Source(ctx context.Context) Source { return SourceOf(ctx, r.Instance()) }

// Add gathers entries for the next write; a counted type is counted
// (Count).
func (r *Recorder) Add(entries ...Entry) {
	if r == nil {
		return
	}
	for _, e := range entries {
		if Counted(e.Type) {
			r.Count(e)
			continue
		}
		r.mu.Lock()
		if len(r.rows) > 0 && len(r.rows)+len(r.counts) >= r.cfg.MaxBuffered {
			r.rows = r.rows[1:]
			r.dropped++
		}
		r.rows = append(r.rows, e)
		r.mu.Unlock()
	}
}

// Count counts e in its key's row of its type: no write per request, one
// per key and interval.
func (r *Recorder) Count(e Entry) {
	if r == nil {
		return
	}
	k := countKey{e.AttemptID, e.Type}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.counts[k]
	if !ok {
		if len(r.rows)+len(r.counts) >= r.cfg.MaxBuffered {
			r.dropped++
			return
		}
		c = &counted{first: e, last: e.At}
		r.counts[k] = c
	}
	c.n++
	if e.At.Before(c.first.At) {
		c.first = e
	}
	if e.At.After(c.last) {
		c.last = e.At
	}
}

// Run writes what was gathered every FlushInterval until ctx ends, and
// once more then.
func (r *Recorder) Run(ctx context.Context) {
	if r == nil {
		return
	}
	t := time.NewTicker(r.cfg.FlushInterval)
	defer t.Stop()
	counted := time.Now()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
			if err := r.Flush(last); err != nil {
				r.log.Warn("history: the last rows could not be written at shutdown", "err", err)
			}
			cancel()
			return
		case now := <-t.C:
			withCounts := now.Sub(counted) >= r.cfg.CountInterval
			if withCounts {
				counted = now
			}
			wctx, cancel := context.WithTimeout(ctx, flushTimeout)
			if err := r.flush(wctx, withCounts); err != nil && ctx.Err() == nil {
				r.log.Warn("history: rows not written yet; trying again", "err", err)
			}
			cancel()
		}
	}
}

// Flush writes what was gathered, counts included, in one transaction; on
// failure it keeps it for the next try.
func (r *Recorder) Flush(ctx context.Context) error { return r.flush(ctx, true) }

// flush writes the rows gathered, and the counts when withCounts.
func (r *Recorder) flush(ctx context.Context, withCounts bool) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	rows, dropped := r.rows, r.dropped
	r.rows, r.dropped = nil, 0
	var counts map[countKey]*counted
	if withCounts {
		counts = r.counts
		r.counts = map[countKey]*counted{}
	}
	r.mu.Unlock()
	if dropped > 0 {
		r.log.Warn("history: rows dropped while the database was away", "rows", dropped)
	}
	if len(rows) == 0 && len(counts) == 0 {
		return nil
	}
	if err := write(ctx, r.pool, rows, counts); err != nil {
		r.putBack(rows, counts)
		return err
	}
	return nil
}

// putBack returns rows and counts that were not written to the next
// write, within the bound.
func (r *Recorder) putBack(rows []Entry, counts map[countKey]*counted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range counts {
		if mine, ok := r.counts[k]; ok {
			mine.n += c.n
			if c.first.At.Before(mine.first.At) {
				mine.first = c.first
			}
			if c.last.After(mine.last) {
				mine.last = c.last
			}
			continue
		}
		r.counts[k] = c
	}
	r.rows = append(rows, r.rows...)
	if over := len(r.rows) + len(r.counts) - r.cfg.MaxBuffered; over > 0 {
		over = min(over, len(r.rows))
		r.rows = r.rows[over:]
		r.dropped += over
	}
}
