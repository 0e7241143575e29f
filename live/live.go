// Package live tells a checkout when its charge attempt changes: the
// chargeUpdated subscription's watchers. The watchers of one attempt on an
// instance share one follower, which reads the attempt for all of them and
// sends each change to each (so a thousand watchers cost one read, not a
// thousand). A finalization on this instance pokes the follower of its
// merchant's key at once (Poke, from the events.Notifier), and one
// connection per instance LISTENs to the other instances' notices of theirs
// (db.EventsChannel); a poked follower reads the attempt again. Each
// follower also reads it every PollInterval, and all of them once the
// LISTEN connection is back after an outage, so that no lost notification
// leaves a client waiting. The connections that carry subscriptions
// (websockets, event streams) are the GraphQL layer's.
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
	// PollInterval is how often a follower reads its attempt again when no
	// notification woke it, so that a missed one never leaves a client waiting.
	PollInterval time.Duration // default PollIntervalDefault
	// MaxWatchers bounds the watchers of this instance, MaxWatchersPerMerchant
	// those of one merchant on it, so that one merchant cannot take them all,
	// and MaxWatchersPerAttempt those of one attempt, so that one shopper's
	// page (or a script holding one attempt) cannot take a merchant's.
	MaxWatchers            int // default MaxWatchersDefault
	MaxWatchersPerMerchant int // default MaxWatchersPerMerchantDefault
	MaxWatchersPerAttempt  int // default MaxWatchersPerAttemptDefault
	// ReconnectMin and ReconnectMax bound the wait before the LISTEN
	// connection is opened again; the wait doubles after each failure.
	ReconnectMin, ReconnectMax time.Duration // defaults db.ReconnectMinDefault, db.ReconnectMaxDefault
	// Self is this instance's id in its own notices (events.Notifier.ID):
	// the Hub skips them, as Poke told it already.
	Self string

	Logger  *slog.Logger     // default: discard
	Metrics *metrics.Metrics // default: instruments nobody scrapes
}

// Defaults of Config, the one place they are written. A checkout page
// watches its attempt once, or a few times over its tabs: five per attempt
// leave room for that and none for a script.
const (
	PollIntervalDefault           = 5 * time.Second
	MaxWatchersDefault            = 10_000
	MaxWatchersPerMerchantDefault = 1_000
	MaxWatchersPerAttemptDefault  = 5
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

	mu sync.Mutex
	// followers holds the follower of each attempt that has watchers and is
	// not final yet.
	followers   map[watchKey]*follower
	count       int
	perMerchant map[uuid.UUID]int
	closed      bool
	wg          sync.WaitGroup
}

// watchKey names an attempt: its merchant, and its key among the keys of
// keySession (uuid.Nil: the merchant's own).
type watchKey struct {
	merchant, keySession uuid.UUID
	key                  string
}

// follower reads one attempt for all its watchers. Its fields after wake
// are the hub's, under its lock.
type follower struct {
	merchant payment.Merchant
	key      string
	wake     chan struct{} // a notification or a reconnect: read the attempt again
	cancel   context.CancelFunc

	watchers map[*watcher]struct{}
	// latest is the attempt as last read: what a new watcher gets first.
	latest payment.Result
	// changes are the states the follower read whose status differs from
	// the one before, in order; changed is closed (and replaced) at each.
	changes []payment.Result
	changed chan struct{}
	// ended says no state will come any more: a final one came, the
	// attempt is gone, or the last watcher left.
	ended bool
}

type watcher struct {
	cancel context.CancelFunc
}

// NewHub returns a Hub that reads attempts through charges, and LISTENs on
// pool's database. Run listens for notifications; without it, followers
// still poll.
func NewHub(pool *pgxpool.Pool, charges Charges, cfg Config) *Hub {
	cfg.PollInterval = cmp.Or(cfg.PollInterval, PollIntervalDefault)
	cfg.MaxWatchers = cmp.Or(cfg.MaxWatchers, MaxWatchersDefault)
	cfg.MaxWatchersPerMerchant = cmp.Or(cfg.MaxWatchersPerMerchant, MaxWatchersPerMerchantDefault)
	cfg.MaxWatchersPerAttempt = cmp.Or(cfg.MaxWatchersPerAttempt, MaxWatchersPerAttemptDefault)
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
		followers: map[watchKey]*follower{}, perMerchant: map[uuid.UUID]int{},
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
// too many watchers is ELIMITED. A watch of an attempt that others on this
// instance watch already reads nothing: it joins their follower.
func (h *Hub) Watch(ctx context.Context, m payment.Merchant, keySession uuid.UUID, key string) (<-chan payment.Result, error) {
	wk := watchKey{merchant: m.ID, keySession: keySession, key: key}
	// Refused before any read: a flood of watches of one attempt costs
	// the database nothing.
	if err := h.admissible(wk); err != nil {
		return nil, err
	}
	if states, ok, err := h.join(ctx, wk, nil); ok || err != nil {
		return states, err
	}
	first, err := h.read(ctx, m, wk)
	if err != nil {
		return nil, err
	}
	if first == nil {
		return nil, &payment.Error{Code: payment.ENOTFOUND, Field: "idempotencyKey",
			Message: "no charge attempt with this idempotency key; subscribe after chargeCard has been sent"}
	}
	if first.Status != payment.StatusProcessing {
		// Final: nothing to follow.
		out := make(chan payment.Result, 1)
		out <- *first
		close(out)
		return out, nil
	}
	states, _, err := h.join(ctx, wk, &started{merchant: m, first: *first})
	return states, err
}

// started is what a watch read when no follower of its attempt existed:
// enough to start one.
type started struct {
	merchant payment.Merchant
	first    payment.Result
}

// admissible refuses a watch of wk that the bounds would refuse, before it
// reads anything.
func (h *Hub) admissible(wk watchKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.boundsLocked(wk)
}

func (h *Hub) boundsLocked(wk watchKey) error {
	switch {
	case h.closed:
		return errHubClosed
	case h.count >= h.cfg.MaxWatchers:
		return h.limited("this server", h.cfg.MaxWatchers)
	case h.perMerchant[wk.merchant] >= h.cfg.MaxWatchersPerMerchant:
		return h.limited("one merchant on this server", h.cfg.MaxWatchersPerMerchant)
	}
	if f := h.followers[wk]; f != nil && len(f.watchers) >= h.cfg.MaxWatchersPerAttempt {
		return h.limited("one charge attempt on this server", h.cfg.MaxWatchersPerAttempt)
	}
	return nil
}

// join adds a watcher to the follower of wk, and returns its states. With
// s nil, it joins only a follower that exists (ok false otherwise); with
// s, it starts one from s when none exists (another watch may have
// started one meanwhile: it joins that one instead).
func (h *Hub) join(ctx context.Context, wk watchKey, s *started) (states <-chan payment.Result, ok bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.followers[wk]
	if f == nil && s == nil {
		return nil, false, nil
	}
	if err := h.boundsLocked(wk); err != nil {
		return nil, false, err
	}
	if f == nil {
		f = h.startLocked(wk, s)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel}
	f.watchers[w] = struct{}{}
	h.count++
	h.perMerchant[wk.merchant]++
	h.metrics.Subscriptions.Inc()
	out := make(chan payment.Result, 1)
	first, next := f.latest, len(f.changes)
	h.wg.Go(func() {
		defer close(out)
		defer h.leave(wk, f, w)
		h.relay(ctx, f, first, next, out)
	})
	return out, true, nil
}

// startLocked starts the follower of wk from what s read.
func (h *Hub) startLocked(wk watchKey, s *started) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{merchant: s.merchant, key: wk.key, wake: make(chan struct{}, 1), cancel: cancel,
		watchers: map[*watcher]struct{}{}, latest: s.first, changed: make(chan struct{})}
	h.followers[wk] = f
	h.wg.Go(func() { h.follow(ctx, wk, f) })
	return f
}

// relay sends a watcher its first state, then each change its follower
// reads from the change numbered next on, until the follower ends or ctx
// does.
func (h *Hub) relay(ctx context.Context, f *follower, first payment.Result, next int, out chan<- payment.Result) {
	select {
	case out <- first:
	case <-ctx.Done():
		return
	}
	for {
		h.mu.Lock()
		changes, changed, ended := f.changes, f.changed, f.ended
		h.mu.Unlock()
		for ; next < len(changes); next++ {
			select {
			case out <- changes[next]:
			case <-ctx.Done():
				return
			}
		}
		if ended {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// leave removes w from f; the last watcher to leave stops the follower.
func (h *Hub) leave(wk watchKey, f *follower, w *watcher) {
	w.cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := f.watchers[w]; !ok {
		return
	}
	delete(f.watchers, w)
	h.count--
	if h.perMerchant[wk.merchant]--; h.perMerchant[wk.merchant] == 0 {
		delete(h.perMerchant, wk.merchant)
	}
	h.metrics.Subscriptions.Dec()
	if len(f.watchers) == 0 {
		h.endLocked(wk, f)
	}
}

// endLocked ends f: no state comes after those it has.
func (h *Hub) endLocked(wk watchKey, f *follower) {
	if f.ended {
		return
	}
	f.ended = true
	close(f.changed)
	f.cancel()
	if h.followers[wk] == f {
		delete(h.followers, wk)
	}
}

// follow reads f's attempt again whenever it is woken or PollInterval has
// passed, and hands each change of status to its watchers, until a final
// one or until it is stopped.
func (h *Hub) follow(ctx context.Context, wk watchKey, f *follower) {
	poll := time.NewTicker(h.cfg.PollInterval)
	defer poll.Stop()
	h.mu.Lock()
	last := f.latest.Status
	h.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-poll.C:
		}
		r, err := h.read(ctx, f.merchant, wk)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// An outage passes: the next wake or poll reads again. It is
			// logged once by the LISTEN loop, not once per follower.
			level := slog.LevelWarn
			if payment.ErrorCode(err) == payment.EUNAVAILABLE {
				level = slog.LevelDebug
			}
			h.log.Log(ctx, level, "live status: could not read the attempt; reading again at the next poll",
				"merchant", f.merchant.Name, "idempotency_key", f.key, "err", err)
			continue
		case r == nil:
			// A PROCESSING attempt is never deleted; a result is forgotten
			// only after it was final, which this follower has then missed.
			h.log.WarnContext(ctx, "live status: the attempt is gone", "merchant", f.merchant.Name, "idempotency_key", f.key)
			h.mu.Lock()
			h.endLocked(wk, f)
			h.mu.Unlock()
			return
		}
		h.mu.Lock()
		f.latest = *r
		if r.Status != last {
			last = r.Status
			f.changes = append(f.changes, *r)
			close(f.changed)
			f.changed = make(chan struct{})
		}
		if last != payment.StatusProcessing {
			h.endLocked(wk, f)
		}
		ended := f.ended
		h.mu.Unlock()
		if ended {
			return
		}
	}
}

// read reads m's attempt wk, and counts the read.
func (h *Hub) read(ctx context.Context, m payment.Merchant, wk watchKey) (*payment.Result, error) {
	h.metrics.LiveReads.Inc()
	return h.charges.ChargeStatusAmong(ctx, m, wk.keySession, wk.key)
}

func (h *Hub) limited(who string, n int) *payment.Error {
	return &payment.Error{Code: payment.ELIMITED, RetryAfter: h.cfg.PollInterval,
		Message: "too many live status subscriptions: " + who + " holds at most " + strconv.Itoa(n) +
			"; close one, or poll chargeStatus, and subscribe again after retryAfterMs"}
}

// Watchers is how many watchers are open on this instance.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// notified wakes the followers of the attempts that a notice on
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

// Poke wakes the follower of attempt a: its events just committed.
func (h *Hub) Poke(a db.NoticedAttempt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.followers[watchKey{merchant: a.MerchantID, keySession: a.KeySession, key: a.IdempotencyKey}]; f != nil {
		f.poke()
	}
}

// wakeAll wakes every follower: notifications may have been lost.
func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.followers {
		f.poke()
	}
}

// poke wakes f; a wake already pending covers this one.
func (f *follower) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run listens for notifications until ctx ends, on one connection of its
// own, opened again after each failure with a growing wait. Followers poll
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
// and their followers to be gone. A server calls it when it starts to shut
// down, once the connections that carry subscriptions are closed, so that
// no subscription holds the shutdown up.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for _, f := range h.followers {
		for w := range f.watchers {
			w.cancel()
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}
