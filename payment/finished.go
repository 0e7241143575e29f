package payment

import (
	"context"
	"time"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"

	"chargeonce/history"
	"chargeonce/metrics"
)

// finishedCache remembers finished attempts (SUCCEEDED or FAILED) by
// merchant and key, so that a retry storm replays from memory: a finished
// attempt never changes (every write to an attempt is fenced on PROCESSING)
// until its result expires and the retention cleaner deletes it, and the
// cache stops answering for it at that expiry. It never holds a PROCESSING
// attempt, whose state is only ever read from the database. Bounded: the
// least recently used entry goes first.
type finishedCache struct {
	entries   *lru.Cache[finishedKey, Attempt]
	hit, miss prometheus.Counter
	// settled reports whether a finished attempt can never change again
	// (its kind's operation says): only such an attempt is remembered.
	settled func(Attempt) bool
}

type finishedKey struct {
	merchant, keySession uuid.UUID
	key                  string
}

// newFinishedCache returns a cache of size entries, or nil (no cache) when
// size is negative.
func newFinishedCache(size int, m *metrics.Metrics, settled func(Attempt) bool) *finishedCache {
	if size < 0 {
		return nil
	}
	entries, err := lru.New[finishedKey, Attempt](size)
	if err != nil {
		panic(err) // only for a size of 0, which withDefaults replaces
	}
	return &finishedCache{entries: entries, settled: settled,
		hit:  m.ResultCache.WithLabelValues(metrics.CacheHit),
		miss: m.ResultCache.WithLabelValues(metrics.CacheMiss)}
}

// get returns the merchant's finished attempt for key among the keys of
// keySession, unless its result has expired at now.
func (c *finishedCache) get(merchant, keySession uuid.UUID, key string, now time.Time) (Attempt, bool) {
	if c == nil {
		return Attempt{}, false
	}
	k := finishedKey{merchant, keySession, key}
	a, ok := c.entries.Get(k)
	if ok && !now.Before(a.ExpiresAt) {
		// Expired: the key may be deleted and claimed anew; ask the database.
		c.entries.Remove(k)
		ok = false
	}
	if !ok {
		c.miss.Inc()
		return Attempt{}, false
	}
	c.hit.Inc()
	return a, true
}

// put remembers a if it is finished.
func (c *finishedCache) put(a Attempt) {
	if c == nil || a.Status == StatusProcessing || !c.settled(a) {
		return
	}
	c.entries.Add(finishedKey{a.MerchantID, a.KeySession, a.IdempotencyKey}, a)
}

// KeepsResults reports whether the instance keeps finished results in
// memory (Config.ResultCacheSize): a caller keeps its renderings of
// replays in memory only if it does.
func (s *Service) KeepsResults() bool { return s.finished != nil }

// A Replay is a replay of a settled attempt (Result.Replay). Its answer
// never changes until the attempt's result expires, so a caller that
// rendered it once may give the rendering again to the same request,
// calling Replayed each time instead of running the request.
type Replay struct{ attempt Attempt }

// CapturesFixed reports whether the replayed attempt's charge is captured
// for good: it took the money at once (captureMethod AUTOMATIC), or there
// is no charge. A MANUAL charge's captures change until it is captured in
// full, voided or lapses.
func (rp *Replay) CapturesFixed() bool {
	t := rp.attempt.charge()
	return t.Charge == nil || t.Input.CaptureMethod != CaptureManual
}

// Replayed counts one more replay of rp answered by the caller from its
// own rendering, as a replay through ChargeCard is counted: in the
// metrics, in the cache of finished results (a hit when the caller kept
// the rendering in memory, a miss when it read it from the database), and
// in the key's history. False once rp's result has expired: the key may
// have been forgotten and claimed anew, and the request must be run.
func (s *Service) Replayed(ctx context.Context, rp *Replay, fromMemory bool) bool {
	now := s.cfg.Now()
	if !now.Before(rp.attempt.ExpiresAt) {
		return false
	}
	if s.finished != nil {
		if fromMemory {
			s.finished.hit.Inc()
		} else {
			s.finished.miss.Inc()
		}
	}
	s.metrics.Replays.Inc()
	s.cfg.History.Count(noteOf(ctx, s.cfg.History, rp.attempt, history.Replayed, "", now))
	return true
}
