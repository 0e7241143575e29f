package payment

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
	"chargeonce/metrics"
)

// HubConfig tunes a Hub. Zero values take the defaults.
type HubConfig struct {
	// PollInterval is how often a watcher reads its attempt again when no
	// notification woke it, so that a missed one never leaves a client waiting.
	PollInterval time.Duration // default WatchPollIntervalDefault
	// MaxWatchers bounds the watchers of this instance, MaxWatchersPerMerchant
	// those of one merchant on it, so that one merchant cannot take them all.
	MaxWatchers            int // default MaxWatchersDefault
	MaxWatchersPerMerchant int // default MaxWatchersPerMerchantDefault
	// ReconnectMin and ReconnectMax bound the wait before the LISTEN
	// connection is opened again; the wait doubles after each failure.
	ReconnectMin, ReconnectMax time.Duration
}

// Defaults of HubConfig, the one place they are written.
const (
	WatchPollIntervalDefault      = 5 * time.Second
	MaxWatchersDefault            = 10_000
	MaxWatchersPerMerchantDefault = 1_000
	ReconnectMinDefault           = 100 * time.Millisecond
	ReconnectMaxDefault           = 10 * time.Second
)

// eventsChannel is the channel that charge_events' trigger notifies at the
// commit of every finalization (db/migrations/00007_events.sql).
const eventsChannel = db.EventsChannel

// Hub tells watchers when a charge attempt changes, on every instance: one
// connection per instance LISTENs to the notification that each finalization
// sends at commit, and wakes the watchers of that (merchant, key), which read
// the attempt again through the Service. Each watcher also reads it every
// PollInterval, and all of them as soon as the LISTEN connection is back after
// an outage, since notifications sent meanwhile are lost. The chargeUpdated
// subscription is a watcher.
type Hub struct {
	svc     *Service
	cfg     HubConfig
	log     *slog.Logger
	metrics *metrics.Metrics

	mu          sync.Mutex
	watchers    map[watchKey]map[*watcher]struct{}
	count       int
	perMerchant map[uuid.UUID]int
	// bound are the contexts handed out by Bind, ended by Close.
	bound  map[*int]context.CancelFunc
	closed bool
	wg     sync.WaitGroup
}

type watchKey struct {
	merchant uuid.UUID
	key      string
}

type watcher struct {
	wake   chan struct{} // a notification or a reconnect: read the attempt again
	cancel context.CancelFunc
}

// NewHub returns a Hub that reads attempts through svc. Run listens for
// notifications; without it, watchers still poll.
func NewHub(svc *Service, cfg HubConfig) *Hub {
	cfg.PollInterval = cmp.Or(cfg.PollInterval, WatchPollIntervalDefault)
	cfg.MaxWatchers = cmp.Or(cfg.MaxWatchers, MaxWatchersDefault)
	cfg.MaxWatchersPerMerchant = cmp.Or(cfg.MaxWatchersPerMerchant, MaxWatchersPerMerchantDefault)
	cfg.ReconnectMin = cmp.Or(cfg.ReconnectMin, ReconnectMinDefault)
	cfg.ReconnectMax = cmp.Or(cfg.ReconnectMax, ReconnectMaxDefault)
	return &Hub{
		svc: svc, cfg: cfg, log: svc.log.With("component", "live-status"), metrics: svc.metrics,
		watchers: map[watchKey]map[*watcher]struct{}{}, perMerchant: map[uuid.UUID]int{}, bound: map[*int]context.CancelFunc{},
	}
}

// errHubClosed answers a watch asked for while the server shuts down.
var errHubClosed = &Error{Code: EUNAVAILABLE, RetryAfter: UnavailableRetryAfter,
	Message: "this server is shutting down; subscribe again (another instance answers) or poll chargeStatus"}

// Watch returns the states of the attempt that m made with key: the current
// one at once, then each change of status, and closes the channel after a
// final state (SUCCEEDED or FAILED), when ctx ends, or when the hub closes.
// A key m never used is ENOTFOUND; too many watchers is ELIMITED.
func (h *Hub) Watch(ctx context.Context, m Merchant, key string) (<-chan Result, error) {
	first, err := h.svc.ChargeStatus(ctx, m, key)
	if err != nil {
		return nil, err
	}
	if first == nil {
		return nil, &Error{Code: ENOTFOUND, Field: "idempotencyKey",
			Message: "no charge attempt with this idempotency key; subscribe after chargeCard has been sent"}
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{wake: make(chan struct{}, 1), cancel: cancel}
	wk := watchKey{merchant: m.ID, key: key}
	if err := h.add(wk, w); err != nil {
		cancel()
		return nil, err
	}
	out := make(chan Result, 1)
	out <- *first
	h.wg.Go(func() {
		defer h.remove(wk, w)
		defer close(out)
		if first.Status != StatusProcessing {
			return
		}
		h.follow(ctx, m, key, *first, w, out)
	})
	return out, nil
}

// follow reads the attempt again whenever w is woken or PollInterval has
// passed, and sends each change of status, until a final one.
func (h *Hub) follow(ctx context.Context, m Merchant, key string, last Result, w *watcher, out chan<- Result) {
	poll := time.NewTicker(h.cfg.PollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-poll.C:
		}
		r, err := h.svc.ChargeStatus(ctx, m, key)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// An outage passes: the next wake or poll reads again. It is
			// logged once by the LISTEN loop, not once per watcher.
			level := slog.LevelWarn
			if ErrorCode(err) == EUNAVAILABLE {
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
		if last.Status != StatusProcessing {
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

func (h *Hub) limited(who string, n int) *Error {
	return &Error{Code: ELIMITED, RetryAfter: h.cfg.PollInterval,
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

// notice is the payload of a notification on eventsChannel.
type notice struct {
	MerchantID     uuid.UUID `json:"merchantId"`
	IdempotencyKey string    `json:"idempotencyKey"`
}

// notified wakes the watchers of the attempt that payload names.
func (h *Hub) notified(payload string) {
	var n notice
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		h.log.Warn("live status: a notification that names no attempt", "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers[watchKey{merchant: n.MerchantID, key: n.IdempotencyKey}] {
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
	h.svc.store.listenAlways(ctx, eventsChannel, h.cfg.ReconnectMin, h.cfg.ReconnectMax, func() {
		h.log.Info("live status: listening for finalizations", "channel", eventsChannel)
		h.wakeAll()
	}, h.notified, func(err error, retryIn time.Duration) {
		h.log.Warn("live status: lost the LISTEN connection; watchers poll until it is back", "err", err, "retry_in", retryIn)
	})
}

// Bind returns a context that ends with ctx or when the hub closes, and
// the function that releases it. The connections that carry subscriptions
// (a websocket, an event stream) live in one, so that a shutdown closes them
// instead of waiting for them.
func (h *Hub) Bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	id := new(int)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		cancel()
		return ctx, cancel
	}
	h.bound[id] = cancel
	h.mu.Unlock()
	return ctx, func() {
		cancel()
		h.mu.Lock()
		delete(h.bound, id)
		h.mu.Unlock()
	}
}

// Close ends every bound context and every watcher, refuses new ones, and
// waits for the watchers to be gone. A server calls it when it starts to
// shut down, so that no subscription holds the shutdown up.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for id, cancel := range h.bound {
		cancel() // synchronously: the connections end before their watchers
		delete(h.bound, id)
	}
	for _, set := range h.watchers {
		for w := range set {
			w.cancel()
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}
