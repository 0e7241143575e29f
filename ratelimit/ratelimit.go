// Package ratelimit keeps a token bucket per key, such as a merchant or a
// client IP, so that one noisy caller cannot starve the others. Buckets are
// golang.org/x/time/rate limiters kept in a bounded LRU cache: memory stays
// bounded however many keys callers invent, and a key forgotten for lack of
// room starts again with a full bucket. Limits are per process; with several
// instances behind a load balancer each enforces its own.
package ratelimit

import (
	"math"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// MaxKeysDefault is how many keys a Limiter remembers.
const MaxKeysDefault = 100_000

// Limiter rations requests per key. A nil *Limiter allows everything.
type Limiter struct {
	rate    rate.Limit
	burst   int
	buckets *lru.Cache[string, *rate.Limiter]
	now     func() time.Time
	// mu orders each look at the clock with the bucket's use of it: an
	// x/time/rate limiter that admits a caller whose time is earlier than
	// its last admission's goes back to that time, and gives the interval's
	// tokens again to the next caller. Callers that read the clock in one
	// order and reached the bucket in another did so under load.
	mu sync.Mutex
}

// New returns a Limiter that allows perSecond requests a second per key on
// average, and bursts of up to burst; nil (no limit) when perSecond is 0.
// maxKeys bounds the keys remembered (MaxKeysDefault when 0).
func New(perSecond float64, burst, maxKeys int) *Limiter {
	if perSecond <= 0 {
		return nil
	}
	if maxKeys <= 0 {
		maxKeys = MaxKeysDefault
	}
	buckets, err := lru.New[string, *rate.Limiter](maxKeys)
	if err != nil {
		panic(err) // only for a non-positive size, excluded above
	}
	return &Limiter{rate: rate.Limit(perSecond), burst: max(burst, 1), buckets: buckets, now: time.Now}
}

func (l *Limiter) bucket(key string) *rate.Limiter {
	fresh := rate.NewLimiter(l.rate, l.burst)
	if prev, found, _ := l.buckets.PeekOrAdd(key, fresh); found {
		l.buckets.Get(key) // mark it recently used
		return prev
	}
	return fresh
}

// Allow takes a token from key's bucket. When there is none it takes
// nothing and says how long until there will be one. (It never reserves a
// token it then gives back: under many concurrent refusals, cancelled
// reservations can hand back more than they took.)
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(key)
	if b.AllowN(now, 1) {
		return true, 0
	}
	return false, l.untilToken(b, now)
}

// GiveBack returns to key's bucket the token an Allow took, for an act
// that turned out not to count (a card-testing allowance taken before a
// charge that then succeeded). The bucket never holds more than its burst:
// a token given back to a full bucket is lost. Unlike a cancelled
// reservation of x/time/rate, which gives back less when other tokens were
// taken since, it returns exactly the one token, so that whoever gives back
// every token they took never runs their bucket down. A key forgotten
// meanwhile has a full bucket already.
func (l *Limiter) GiveBack(key string) {
	if l == nil {
		return
	}
	b, found := l.buckets.Peek(key)
	if !found {
		return
	}
	// AllowN with -1 adds a token; the limiter caps what a bucket holds at
	// its burst at the next look (advance), so a full bucket stays full.
	l.mu.Lock()
	defer l.mu.Unlock()
	b.AllowN(l.now(), -1)
}

// untilToken is how long until b holds a whole token again.
func (l *Limiter) untilToken(b *rate.Limiter, now time.Time) time.Duration {
	missing := 1 - b.TokensAt(now)
	return max(time.Duration(math.Ceil(missing/float64(l.rate)*float64(time.Second))), time.Millisecond)
}

// Exhausted reports, without taking a token, whether key's bucket is empty,
// and how long until it holds one again.
func (l *Limiter) Exhausted(key string) (bool, time.Duration) {
	if l == nil {
		return false, 0
	}
	b, found := l.buckets.Peek(key)
	if !found {
		return false, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if b.TokensAt(now) >= 1 {
		return false, 0
	}
	return true, l.untilToken(b, now)
}
