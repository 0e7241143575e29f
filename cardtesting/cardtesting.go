// Package cardtesting rations what card testing spends: the declines that
// checkout pages' publishable keys cause, and the client secrets they guess.
// A script that tries stolen cards through a merchant's public checkout
// declines many times; a shopper who retypes a card declines once or twice.
//
// Per client address, an allowance is taken before the provider is called
// (Guard.Take) and given back when the charge was not declined
// (Ticket.Release), so that a wave of concurrent declines from one address
// passes no more than its burst, while an address that pays keeps its whole
// allowance. Per publishable key, the declines of every shopper together
// are counted but never refuse anyone: a merchant's checkout must not be
// switched off by strangers' declines. When they run over their allowance,
// card testing is suspected for a while (Config.SuspicionWindow): a metric,
// a warning and the merchant's event say so, and each decline costs its
// address twice as much meanwhile; an address that has declined nothing
// still pays.
package cardtesting

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"

	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/ratelimit"
)

// Defaults of Config, the one place they are written. A client address may
// average one decline every 20 seconds with bursts of 10, which a shopper
// retyping a card never reaches and a card-testing script hits at once; a
// publishable key, which serves every shopper of its merchant, one a second
// with bursts of 100 before card testing is suspected.
const (
	AddressRateDefault      = 0.05
	AddressBurstDefault     = 10
	KeyRateDefault          = 1
	KeyBurstDefault         = 100
	SuspicionWindowDefault  = 15 * time.Minute
	suspectedKeysRemembered = 10_000
)

// Config tunes a Guard. Rates are per second; a zero rate turns its scope
// off (no address limit; no suspicion).
type Config struct {
	AddressRate  float64
	AddressBurst int
	KeyRate      float64
	KeyBurst     int
	// SuspicionWindow is how long a suspicion lasts after the decline that
	// raised it; a key's declines raise at most one per window.
	SuspicionWindow time.Duration // default SuspicionWindowDefault
	// Suspected is told of each suspicion raised (the merchant's
	// merchant.card_testing_suspected event); nil: nobody.
	Suspected func(context.Context, Suspicion)
	Logger    *slog.Logger     // default: discard
	Metrics   *metrics.Metrics // default: instruments nobody scrapes
	Now       func() time.Time // default time.Now
}

// Suspicion is card testing suspected through a merchant's publishable key,
// raised At, lasting Until.
type Suspicion struct {
	Merchant payment.Merchant
	KeyID    uuid.UUID
	At       time.Time
	Until    time.Time
}

// Guard rations publishable keys' declines and guesses. A nil *Guard
// rations nothing.
type Guard struct {
	cfg     Config
	address *ratelimit.Limiter
	key     *ratelimit.Limiter
	log     *slog.Logger
	metrics *metrics.Metrics

	mu sync.Mutex
	// until is when each suspected key's suspicion ends.
	until *lru.Cache[uuid.UUID, time.Time]
}

// New returns a Guard of cfg.
func New(cfg Config) *Guard {
	cfg.SuspicionWindow = cmp.Or(cfg.SuspicionWindow, SuspicionWindowDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Discard()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	until, err := lru.New[uuid.UUID, time.Time](suspectedKeysRemembered)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &Guard{
		cfg:     cfg,
		address: ratelimit.New(cfg.AddressRate, cfg.AddressBurst, 0),
		key:     ratelimit.New(cfg.KeyRate, cfg.KeyBurst, 0),
		log:     cfg.Logger,
		metrics: cfg.Metrics,
		until:   until,
	}
}

// Ticket is the allowance an attempt or a lookup of a publishable key took
// from its client address. Exactly one of Declined, Guessed or Release
// settles it.
type Ticket struct {
	g       *Guard
	address string
	taken   bool
}

// Take takes one of address's allowance before a publishable key's charge
// or lookup runs. When there is none, nothing may run: ok is false, with
// how long until there is.
func (g *Guard) Take(address string) (t Ticket, ok bool, retryAfter time.Duration) {
	if g == nil {
		return Ticket{}, true, 0
	}
	if ok, wait := g.address.Allow(address); !ok {
		g.metrics.RateLimited.WithLabelValues("declines_ip").Inc()
		return Ticket{}, false, wait
	}
	return Ticket{g: g, address: address, taken: true}, true, 0
}

// Release gives the allowance back: the charge was not declined (it
// succeeded, waits, was refused before the provider, or is a replay), or
// the lookup found what it named.
func (t Ticket) Release() {
	if t.taken {
		t.g.address.GiveBack(t.address)
	}
}

// Guessed keeps the allowance spent: the client secret named no session
// of the merchant.
func (t Ticket) Guessed() {
	if !t.taken {
		return
	}
	t.g.metrics.Declines.WithLabelValues("ip").Inc()
}

// Declined keeps the allowance spent, counts the decline against the
// publishable key keyID of m, and raises a suspicion of card testing when
// the key's declines run over their allowance. While m's key is suspected,
// a decline costs its address one more of its allowance.
func (t Ticket) Declined(ctx context.Context, m payment.Merchant, keyID uuid.UUID) {
	if !t.taken {
		return
	}
	g := t.g
	g.metrics.Declines.WithLabelValues("ip").Inc()
	g.metrics.Declines.WithLabelValues("key").Inc()
	now := g.cfg.Now()
	if ok, _ := g.key.Allow(keyID.String()); !ok {
		g.suspect(ctx, m, keyID, now)
	}
	if g.suspected(keyID, now) {
		g.address.Allow(t.address) // the price of a decline doubles; an empty bucket stays empty
	}
}

// suspected reports whether keyID is suspected at now.
func (g *Guard) suspected(keyID uuid.UUID, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.until.Get(keyID)
	return ok && now.Before(until)
}

// suspect raises a suspicion of card testing through keyID, unless one is
// open already.
func (g *Guard) suspect(ctx context.Context, m payment.Merchant, keyID uuid.UUID, now time.Time) {
	s := Suspicion{Merchant: m, KeyID: keyID, At: now, Until: now.Add(g.cfg.SuspicionWindow)}
	g.mu.Lock()
	if until, ok := g.until.Get(keyID); ok && now.Before(until) {
		g.mu.Unlock()
		return
	}
	g.until.Add(keyID, s.Until)
	g.mu.Unlock()
	g.metrics.CardTestingSuspected.Inc()
	g.log.WarnContext(ctx, "card testing suspected: a publishable key's declines ran over their allowance; each decline costs its client address double until the window ends, and no address that has declined nothing is refused",
		"merchant", m.Name, "key_id", keyID, "until", s.Until)
	if g.cfg.Suspected != nil {
		g.cfg.Suspected(ctx, s)
	}
}
