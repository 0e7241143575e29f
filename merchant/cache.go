package merchant

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"

	"chargeonce/db"
	"chargeonce/metrics"
	"chargeonce/payment"
)

// Defaults of Config, the one place they are written.
const (
	APIKeyCacheTTLDefault  = 30 * time.Second
	APIKeyCacheSizeDefault = 10_000
)

// keyCache remembers successful authentications, by the key's SHA-256 (never
// the key), so that a request with a recently seen key needs no database.
// It answers only while live: while Merchants.Run listens on db.APIKeysChannel,
// whose every notification (any key or merchant changed, anywhere) empties
// it. Not live, it answers nothing and keeps nothing. The TTL bounds how
// stale an entry may be should notifications be lost without the connection
// failing visibly (a silent network cut lasts until the LISTEN health check).
type keyCache struct {
	ttl time.Duration
	now func() time.Time

	hit, miss, bypass prometheus.Counter

	mu   sync.Mutex
	live bool
	// gen counts resets. A lookup remembers it before reading the database,
	// and its result is kept only if no reset came meanwhile: a revocation
	// notified during the lookup may not be in what the lookup read.
	gen uint64
	// entries is bounded: the least recently used goes first.
	entries *lru.Cache[[sha256.Size]byte, cachedKey]
}

type cachedKey struct {
	caller Caller
	at     time.Time
}

func newKeyCache(ttl time.Duration, size int, m *metrics.Metrics) *keyCache {
	entries, err := lru.New[[sha256.Size]byte, cachedKey](size)
	if err != nil {
		panic(err) // only for a size below 1, which NewWithConfig replaces
	}
	return &keyCache{ttl: ttl, now: time.Now,
		hit:     m.AuthCache.WithLabelValues(metrics.CacheHit),
		miss:    m.AuthCache.WithLabelValues(metrics.CacheMiss),
		bypass:  m.AuthCache.WithLabelValues(metrics.CacheBypass),
		entries: entries}
}

// get returns the caller cached for hash, if live and younger than
// maxAge (at most the TTL); otherwise the generation to hand to put after
// the lookup.
func (c *keyCache) get(hash [sha256.Size]byte, maxAge time.Duration) (m Caller, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		c.bypass.Inc()
		return Caller{}, false, c.gen
	}
	e, ok := c.entries.Get(hash)
	if ok && c.now().Sub(e.at) < min(maxAge, c.ttl) {
		c.hit.Inc()
		return e.caller, true, c.gen
	}
	if ok && c.now().Sub(e.at) >= c.ttl {
		c.entries.Remove(hash)
	}
	c.miss.Inc()
	return Caller{}, false, c.gen
}

// put caches m for hash, unless the cache is not live or was reset since
// get returned gen.
func (c *keyCache) put(hash [sha256.Size]byte, m Caller, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || gen != c.gen {
		return
	}
	c.entries.Add(hash, cachedKey{caller: m, at: c.now()})
}

// forget drops what the cache holds for hash.
func (c *keyCache) forget(hash [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Remove(hash)
}

// reset empties the cache and makes it live or not.
func (c *keyCache) reset(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.live = live
	c.entries.Purge()
}

// isLive reports whether the cache answers.
func (c *keyCache) isLive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// Run caches successful authentications while it listens for changes of API
// keys, until ctx ends: each change, committed anywhere, empties the cache,
// and while the LISTEN connection is down (it is opened again with a growing
// wait) every request is looked up in the database. Without Run, the
// Service caches nothing. It tells the OnChange listeners of each change
// it hears, and each time it listens again (changes may have passed
// unheard meanwhile).
func (ms *Service) Run(ctx context.Context) {
	defer ms.cache.reset(false)
	db.ListenAlways(ctx, ms.store.pool, db.APIKeysChannel, db.Reconnect{Min: ms.cfg.ReconnectMin, Max: ms.cfg.ReconnectMax}, func() {
		ms.cache.reset(true)
		ms.log.Info("API key cache: listening for key changes", "channel", db.APIKeysChannel)
		ms.changed()
	}, func(string) {
		ms.cache.reset(true)
		ms.changed()
	}, func(err error, retryIn time.Duration) {
		ms.cache.reset(false)
		ms.log.Warn("API key cache: lost the LISTEN connection; every request reads its key from the database until it is back",
			"err", payment.DBError(err), "retry_in", retryIn)
	})
}

// OnChange registers f to be called at each change of an API key, a
// merchant or a merchant's origins that Run hears of (committed anywhere),
// and each time Run listens again. f runs on Run's goroutine, after the
// cache was emptied: it must not block (signal, and do the work elsewhere).
// Open streams re-check their key and origin with it (graph.Streams).
func (ms *Service) OnChange(f func()) {
	ms.listenersMu.Lock()
	defer ms.listenersMu.Unlock()
	ms.listeners = append(ms.listeners, f)
}

func (ms *Service) changed() {
	ms.listenersMu.Lock()
	listeners := slices.Clone(ms.listeners)
	ms.listenersMu.Unlock()
	for _, f := range listeners {
		f()
	}
}
