// Package live tells a checkout when its charge attempt changes: the
// chargeUpdated subscription's watchers. A finalization on this instance
// pokes the watchers of its merchant's key at once (Poke, from the
// events.Notifier), and one connection per instance LISTENs to the other
// instances' notices of theirs (db.EventsChannel); a poked watcher reads the
// attempt again. Each watcher also reads it every PollInterval,
// and all of them once the LISTEN connection is back after an outage, so
// that no lost notification leaves a client waiting. The connections that
// carry subscriptions (websockets, event streams) are the GraphQL layer's.
package live

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/metrics"
	"chargeonce/payment"
)

// Config tunes a Hub. Zero values take the defaults.
type Config struct {
	// PollInterval is how often a watcher reads its attempt again when no
	// notification woke it, so that a missed one never leaves a client waiting.
	PollInterval time.Duration // default PollIntervalDefault
	// MaxWatchers bounds the watchers of this instance, MaxWatchersPerMerchant
	// those of one merchant on it, so that one merchant cannot take them all.
	MaxWatchers            int // default MaxWatchersDefault
	MaxWatchersPerMerchant int // default MaxWatchersPerMerchantDefault
	// ReconnectMin and ReconnectMax bound the wait before the LISTEN
	// connection is opened again; the wait doubles after each failure.
	ReconnectMin, ReconnectMax time.Duration // defaults db.ReconnectMinDefault, db.ReconnectMaxDefault
	// Self is this instance's id in its own notices (events.Notifier.ID):
	// the Hub skips them, as Poke told it already.
	Self string

	Logger  *slog.Logger     // default: discard
	Metrics *metrics.Metrics // default: instruments nobody scrapes
}

// Defaults of Config, the one place they are written.
const (
	PollIntervalDefault           = 5 * time.Second
	MaxWatchersDefault            = 10_000
	MaxWatchersPerMerchantDefault = 1_000
)

// Charges reads the state of a merchant's charge attempt by its key among
// the keys of a checkout session (uuid.Nil: the merchant's own):
// payment.Service's ChargeStatusAmong, nil for a key never used there.
type Charges interface {
	ChargeStatusAmong(ctx context.Context, m payment.Merchant, keySession uuid.UUID, key string) (*payment.Result, error)
}

// Hub tells watchers when a charge attempt changes, on every instance.
type Hub struct {
	pool    *pgxpool.Pool
	charges Charges
	cfg     Config
	log     *slog.Logger
	metrics *metrics.Metrics

	mu          sync.Mutex
	watchers    map[watchKey]map[*watcher]struct{}
	count       int
	perMerchant map[uuid.UUID]int
	closed      bool
	wg          sync.WaitGroup
}

type watchKey struct {
	merchant uuid.UUID
	key      string
}

type watcher struct {
	wake   chan struct{} // a notification or a reconnect: read the attempt again
	cancel context.CancelFunc
}

// NewHub returns a Hub that reads attempts through charges, and LISTENs on
// pool's database. Run listens for notifications; without it, watchers
// still poll.
func NewHub(pool *pgxpool.Pool, charges Charges, cfg Config) *Hub {
	cfg.PollInterval = cmp.Or(cfg.PollInterval, PollIntervalDefault)
	cfg.MaxWatchers = cmp.Or(cfg.MaxWatchers, MaxWatchersDefault)
	cfg.MaxWatchersPerMerchant = cmp.Or(cfg.MaxWatchersPerMerchant, MaxWatchersPerMerchantDefault)
	cfg.ReconnectMin = cmp.Or(cfg.ReconnectMin, db.ReconnectMinDefault)
	cfg.ReconnectMax = cmp.Or(cfg.ReconnectMax, db.ReconnectMaxDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Discard()
	}
	return &Hub{
		pool: pool, charges: charges, cfg: cfg, log: cfg.Logger.With("component", "live-status"), metrics: cfg.Metrics,
		watchers: map[watchKey]map[*watcher]struct{}{}, perMerchant: map[uuid.UUID]int{},
	}
}

// errHubClosed answers a watch asked for while the server shuts down.
var errHubClosed = &payment.Error{Code: payment.EUNAVAILABLE, RetryAfter: payment.UnavailableRetryAfter,
	Message: "this server is shutting down; subscribe again (another instance answers) or poll chargeStatus"}

// Watch returns the states of the attempt that m made with key among the
// keys of keySession (uuid.Nil: the merchant's own; a session's id for a
// page's attempt): the current one at once, then each change of status,
// and closes the channel after a final state (SUCCEEDED or FAILED), when
// ctx ends, or when the hub closes. A key never used there is ENOTFOUND;
// too many watchers is ELIMITED.
func (h *Hub) Watch(ctx context.Context, m payment.Merchant, keySession uuid.UUID, key string) (<-chan payment.Result, error) {
	first, err := h.charges.ChargeStatusAmong(ctx, m, keySession, key)
	if err != nil {
		return nil, err
	}
	if first == nil {
		return nil, &payment.Error{Code: payment.ENOTFOUND, Field: "idempotencyKey",
			Message: "no charge attempt with this idempotency key; subscribe after chargeCard has been sent"}
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{wake: make(chan struct{}, 1), cancel: cancel}
	wk := watchKey{merchant: m.ID, key: key}
	if err := h.add(wk, w); err != nil {
		cancel()
		return nil, err
	}
	out := make(chan payment.Result, 1)
	out <- *first
	h.wg.Go(func() {
		defer h.remove(wk, w)
		defer close(out)
		if first.Status != payment.StatusProcessing {
			return
		}
		h.follow(ctx, m, keySession, key, *first, w, out)
	})
	return out, nil
}

// follow reads the attempt again whenever w is woken or PollInterval has
// passed, and sends each change of status, until a final one.
func (h *Hub) follow(ctx context.Context, m payment.Merchant, keySession uuid.UUID, key string, last payment.Result, w *watcher, out chan<- payment.Result) {
	poll := time.NewTicker(h.cfg.PollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-poll.C:
		}
		r, err := h.charges.ChargeStatusAmong(ctx, m, keySession, key)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// An outage passes: the next wake or poll reads again. It is
			// logged once by the LISTEN loop, not once per watcher.
			level := slog.LevelWarn
			if payment.ErrorCode(err) == payment.EUNAVAILABLE {
				level = slog.LevelDebug
			}
			h.log.Log(ctx, level, "live status: could not read the attempt; reading again at the next poll",
				"merchant", m.Name, "idempotency_key", key, "err", err)
			continue
		case r == nil:
			// A PROCESSING attempt is never deleted; a result is forgotten
			// only after it was final, which this watcher has then missed.
			h.log.WarnContext(ctx, "live status: the attempt is gone", "merchant", m.Name, "idempotency_key", key)
			return
		case r.Status == last.Status:
			continue
		}
		last = *r
		select {
		case out <- last:
		case <-ctx.Done():
			return
		}
		if last.Status != payment.StatusProcessing {
			return
		}
	}
}

func (h *Hub) add(wk watchKey, w *watcher) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return errHubClosed
	case h.count >= h.cfg.MaxWatchers:
		return h.limited("this server", h.cfg.MaxWatchers)
	case h.perMerchant[wk.merchant] >= h.cfg.MaxWatchersPerMerchant:
		return h.limited("one merchant on this server", h.cfg.MaxWatchersPerMerchant)
	}
	set := h.watchers[wk]
	if set == nil {
		set = map[*watcher]struct{}{}
		h.watchers[wk] = set
	}
	set[w] = struct{}{}
	h.count++
	h.perMerchant[wk.merchant]++
	h.metrics.Subscriptions.Inc()
	return nil
}

func (h *Hub) limited(who string, n int) *payment.Error {
	return &payment.Error{Code: payment.ELIMITED, RetryAfter: h.cfg.PollInterval,
		Message: "too many live status subscriptions: " + who + " holds at most " + strconv.Itoa(n) +
			"; close one, or poll chargeStatus, and subscribe again after retryAfterMs"}
}

func (h *Hub) remove(wk watchKey, w *watcher) {
	w.cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.watchers[wk]
	if _, ok := set[w]; !ok {
		return
	}
	delete(set, w)
	if len(set) == 0 {
		delete(h.watchers, wk)
	}
	h.count--
	if h.perMerchant[wk.merchant]--; h.perMerchant[wk.merchant] == 0 {
		delete(h.perMerchant, wk.merchant)
	}
	h.metrics.Subscriptions.Dec()
}

// Watchers is how many watchers are open on this instance.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// notified wakes the watchers of the attempts that a notice on
// db.EventsChannel names, or all of them for a notice that names too many;
// this instance's own notices are skipped. A payload of the per-event
// trigger that migration 00015 removed (one attempt, during a rolling
// deploy) is still understood.
func (h *Hub) notified(payload string) {
	var n struct {
		db.EventsNotice
		db.NoticedAttempt
	}
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		h.log.Warn("live status: a notification that names no attempt", "err", err)
		return
	}
	switch {
	case n.From != "" && n.From == h.cfg.Self:
	case n.All:
		h.wakeAll()
	case n.From == "":
		h.Poke(n.NoticedAttempt)
	default:
		for _, a := range n.Attempts {
			h.Poke(a)
		}
	}
}

// Poke wakes the watchers of attempt a: its events just committed.
func (h *Hub) Poke(a db.NoticedAttempt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers[watchKey{merchant: a.MerchantID, key: a.IdempotencyKey}] {
		w.poke()
	}
}

// wakeAll wakes every watcher: notifications may have been lost.
func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.watchers {
		for w := range set {
			w.poke()
		}
	}
}

// poke wakes w; a wake already pending covers this one.
func (w *watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run listens for notifications until ctx ends, on one connection of its
// own, opened again after each failure with a growing wait. Watchers poll
// meanwhile, and are all woken once it is back.
func (h *Hub) Run(ctx context.Context) {
	db.ListenAlways(ctx, h.pool, db.EventsChannel, db.Reconnect{Min: h.cfg.ReconnectMin, Max: h.cfg.ReconnectMax}, func() {
		h.log.Info("live status: listening for finalizations", "channel", db.EventsChannel)
		h.wakeAll()
	}, h.notified, func(err error, retryIn time.Duration) {
		h.log.Warn("live status: lost the LISTEN connection; watchers poll until it is back", "err", payment.DBError(err), "retry_in", retryIn)
	})
}

// Close ends every watcher, refuses new ones, and waits for the watchers
// to be gone. A server calls it when it starts to shut down, once the
// connections that carry subscriptions are closed, so that no
// subscription holds the shutdown up.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for _, set := range h.watchers {
		for w := range set {
			w.cancel()
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}
