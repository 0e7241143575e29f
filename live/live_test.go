package live

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/events"
	"chargeonce/merchant"
	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
)

// noPoll is a poll interval no test waits for: what arrives came by a
// notification (or a reconnect).
const noPoll = time.Hour

// watchWithin bounds every wait for a watcher: generous, the machine is noisy.
const watchWithin = 30 * time.Second

// bundle is a payment service on a real database, charging through the
// real simulator, with a clock the test moves, and its demo merchant.
type bundle struct {
	pool     *pgxpool.Pool
	svc      *payment.Service
	merchant payment.Merchant
	clock    *clock
	provider payment.Provider
	notifier *events.Notifier
}

// setup's service stands for another instance: its commits reach the hub
// by its notifier's NOTIFY, as they would from elsewhere.
func setup(t *testing.T) *bundle {
	t.Helper()
	pool := dbtest.NewPool(t, cardsimtest.Schema)
	sim := cardsimtest.Start(t, pool, cardsimtest.Options{})
	c := &clock{now: time.Now()}
	notifier := events.NewNotifier(pool, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); notifier.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	provider := simprovider.New(sim.URL, 5*time.Second, nil)
	svc := payment.NewService(pool, provider, payment.Config{Now: c.Now, EventsCommitted: notifier.Committed})
	m, err := merchant.New(pool, true).EnsureDevelopmentKey(context.Background(), "demo", "demo-key", merchant.KeySecret)
	require.NoError(t, err)
	return &bundle{pool: pool, svc: svc, merchant: m, clock: c, provider: provider, notifier: notifier}
}

// clock is a clock that moves only when told to.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newHub(b *bundle, cfg Config) *Hub { return NewHub(b.pool, b.svc, cfg) }

// startHub runs a hub on b's service until the test ends.
func startHub(t *testing.T, b *bundle, cfg Config) *Hub {
	t.Helper()
	h := newHub(b, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	t.Cleanup(func() { h.Close(); cancel(); <-done })
	return h
}

// processing leaves an attempt PROCESSING with nobody holding it: the
// provider charged and the answer was lost, so only a reconciler pass (or a
// retry) finalizes it.
func (b *bundle) processing(t *testing.T, key string) {
	t.Helper()
	r, err := b.svc.ChargeCard(context.Background(), b.merchant, key, card("pm_card_lostResponse"))
	require.NoError(t, err)
	require.Equal(t, payment.StatusProcessing, r.Status)
}

// reconcile runs one reconciler pass, which finalizes every released attempt.
func (b *bundle) reconcile(t *testing.T) {
	t.Helper()
	b.clock.Advance(time.Millisecond)
	_, err := payment.NewReconciler(b.svc, payment.ReconcilerConfig{}).RunOnce(context.Background())
	require.NoError(t, err)
}

// next waits for the watcher's next state; ok is false when it closed.
func next(t *testing.T, states <-chan payment.Result) (payment.Result, bool) {
	t.Helper()
	select {
	case r, ok := <-states:
		return r, ok
	case <-time.After(watchWithin):
		t.Fatalf("no state and no close within %s", watchWithin)
		return payment.Result{}, false
	}
}

// requireStates reads the watcher to its end and checks the statuses it sent.
func requireStates(t *testing.T, states <-chan payment.Result, want ...payment.Status) []payment.Result {
	t.Helper()
	var got []payment.Result
	for {
		r, ok := next(t, states)
		if !ok {
			break
		}
		got = append(got, r)
	}
	statuses := make([]payment.Status, len(got))
	for i, r := range got {
		statuses[i] = r.Status
	}
	require.Equal(t, want, statuses)
	return got
}

// listener waits until the hub on pool's database has exactly one LISTEN
// connection, not the one of backend pid not (0: any), and returns its pid.
func listener(t *testing.T, pool *pgxpool.Pool, not int) int {
	t.Helper()
	var pid int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pids := dbtest.ListenerPIDs(c, pool)
		require.Len(c, pids, 1)
		require.NotEqual(c, not, pids[0], "a new LISTEN connection")
		pid = pids[0]
	}, watchWithin, 20*time.Millisecond)
	return pid
}

// cut ends the LISTEN connection of backend pid, as a database restart or
// a network cut would.
func cut(t *testing.T, pool *pgxpool.Pool, pid int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
}

// status is the state of b's attempt for key.
func (b *bundle) status(t *testing.T, key string) *payment.Result {
	t.Helper()
	r, err := b.svc.ChargeStatus(context.Background(), b.merchant, key)
	require.NoError(t, err)
	return r
}

func visa(amount int64) payment.ChargeInput {
	return payment.ChargeInput{Amount: amount, Currency: "USD", PaymentMethod: "pm_card_visa"}
}

func card(pm string) payment.ChargeInput {
	in := visa(1999)
	in.PaymentMethod = pm
	return in
}

func TestHub_FinalizedElsewhere_NotificationWakesTheWatcher(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := startHub(t, b, Config{PollInterval: noPoll})
	b.processing(t, "k")

	states, err := h.Watch(context.Background(), b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	first, ok := next(t, states)
	require.True(t, ok)
	require.Equal(t, payment.StatusProcessing, first.Status, "the current state at once")
	require.Equal(t, 1, h.Watchers())

	// Another holder (here a reconciler pass; in production, any instance)
	// finalizes: its commit notifies, and the watcher reads the attempt again.
	b.reconcile(t)
	got := requireStates(t, states, payment.StatusSucceeded)
	require.Equal(t, b.status(t, "k").Charge.ID, got[0].Charge.ID)
	require.Eventually(t, func() bool { return h.Watchers() == 0 }, watchWithin, 10*time.Millisecond, "a final state ends the watcher")
}

func TestHub_FinalizedHere_PokedInProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The hub of the instance that commits: never Run, so it LISTENs to
	// nothing and does not poll; only its notifier's in-process poke can
	// tell the watcher.
	h := newHub(b, Config{PollInterval: noPoll, Self: b.notifier.ID})
	b.notifier.OnCommit(h.Poke)
	b.processing(t, "k")
	states, err := h.Watch(context.Background(), b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	first, _ := next(t, states)
	require.Equal(t, payment.StatusProcessing, first.Status)

	b.reconcile(t)
	requireStates(t, states, payment.StatusSucceeded)
}

func TestHub_AlreadyFinal_OneStateThenClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newHub(b, Config{PollInterval: noPoll}) // no listener needed
	_, err := b.svc.ChargeCard(context.Background(), b.merchant, "paid", visa(100))
	require.NoError(t, err)
	_, err = b.svc.ChargeCard(context.Background(), b.merchant, "declined", card("pm_card_chargeDeclined"))
	require.NoError(t, err)

	states, err := h.Watch(context.Background(), b.merchant, uuid.Nil, "paid")
	require.NoError(t, err)
	requireStates(t, states, payment.StatusSucceeded)
	states, err = h.Watch(context.Background(), b.merchant, uuid.Nil, "declined")
	require.NoError(t, err)
	require.Equal(t, "card_declined", requireStates(t, states, payment.StatusFailed)[0].Failure.Code)
}

func TestHub_UnknownOrOtherMerchantsKey_IsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newHub(b, Config{})
	other, _, err := merchant.New(b.pool, false).CreateAPIKey(context.Background(), "other", merchant.KeySecret)
	require.NoError(t, err)
	b.processing(t, "k")

	for name, m := range map[string]payment.Merchant{"another merchant's key": other, "unknown key": b.merchant} {
		key := "k"
		if name == "unknown key" {
			key = "never-used"
		}
		states, err := h.Watch(context.Background(), m, uuid.Nil, key)
		require.Nil(t, states, name)
		require.Equal(t, payment.ENOTFOUND, payment.ErrorCode(err), name)
	}
	_, err = h.Watch(context.Background(), b.merchant, uuid.Nil, "no spaces allowed")
	require.Equal(t, payment.EINVALID, payment.ErrorCode(err))
	require.Zero(t, h.Watchers())
}

func TestHub_MissedNotification_PollFindsTheChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// An instance that tells nobody of its commits (it died before its
	// notice went out): only the poll can tell the watcher.
	b.svc = payment.NewService(b.pool, b.provider, payment.Config{Now: b.clock.Now})
	h := startHub(t, b, Config{PollInterval: 100 * time.Millisecond})
	b.processing(t, "k")
	states, err := h.Watch(context.Background(), b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	first, _ := next(t, states)
	require.Equal(t, payment.StatusProcessing, first.Status)

	b.reconcile(t)
	requireStates(t, states, payment.StatusSucceeded)
}

func TestHub_ListenConnectionLost_ReconnectsAndWakesWatchers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := startHub(t, b, Config{PollInterval: noPoll, ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	b.processing(t, "before")
	lost := listener(t, b.pool, 0)
	before, err := h.Watch(context.Background(), b.merchant, uuid.Nil, "before")
	require.NoError(t, err)
	first, _ := next(t, before)
	require.Equal(t, payment.StatusProcessing, first.Status)

	// The database drops the LISTEN connection; the attempt is finalized
	// while it may be gone, so its notification may be lost: the watcher
	// learns it when the hub is back and wakes everyone.
	cut(t, b.pool, lost)
	b.reconcile(t)
	requireStates(t, before, payment.StatusSucceeded)
	listener(t, b.pool, lost)
}

func TestHub_ListensAgain_AfterReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := startHub(t, b, Config{PollInterval: noPoll, ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	lost := listener(t, b.pool, 0)
	cut(t, b.pool, lost)
	listener(t, b.pool, lost)

	b.processing(t, "k")
	states, err := h.Watch(context.Background(), b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	first, _ := next(t, states)
	require.Equal(t, payment.StatusProcessing, first.Status)
	b.reconcile(t)
	requireStates(t, states, payment.StatusSucceeded)
}

func TestHub_Bounds_RefuseMoreWatchers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newHub(b, Config{PollInterval: noPoll, MaxWatchers: 2, MaxWatchersPerMerchant: 1})
	other, _, err := merchant.New(b.pool, false).CreateAPIKey(context.Background(), "other", merchant.KeySecret)
	require.NoError(t, err)
	_, err = b.svc.ChargeCard(context.Background(), other, "o", card("pm_card_lostResponse"))
	require.NoError(t, err)
	b.processing(t, "a")
	b.processing(t, "b")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = h.Watch(ctx, b.merchant, uuid.Nil, "a")
	require.NoError(t, err)
	_, err = h.Watch(ctx, b.merchant, uuid.Nil, "b")
	require.Equal(t, payment.ELIMITED, payment.ErrorCode(err), "one per merchant")
	var limited *payment.Error
	require.ErrorAs(t, err, &limited)
	require.Positive(t, limited.RetryAfter)
	_, err = h.Watch(ctx, other, uuid.Nil, "o")
	require.NoError(t, err, "another merchant has its own share")
	_, err = h.Watch(ctx, other, uuid.Nil, "o")
	require.Equal(t, payment.ELIMITED, payment.ErrorCode(err), "two on the instance")
	require.Equal(t, 2, h.Watchers())

	cancel() // the clients go away
	require.Eventually(t, func() bool { return h.Watchers() == 0 }, watchWithin, 10*time.Millisecond)
	_, err = h.Watch(context.Background(), b.merchant, uuid.Nil, "b")
	require.NoError(t, err, "room again")
}

func TestHub_Close_EndsWatchersAndRefusesNewOnes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newHub(b, Config{PollInterval: noPoll})
	b.processing(t, "k")
	states, err := h.Watch(context.Background(), b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	first, _ := next(t, states)
	require.Equal(t, payment.StatusProcessing, first.Status)

	h.Close()
	_, ok := next(t, states)
	require.False(t, ok, "the watcher is closed, with nothing more sent")
	require.Zero(t, h.Watchers())
	_, err = h.Watch(context.Background(), b.merchant, uuid.Nil, "k")
	require.Equal(t, payment.EUNAVAILABLE, payment.ErrorCode(err), "a closed hub refuses new watchers")
}

// countingCharges counts the reads of attempts the hub makes, through the
// real payment service.
type countingCharges struct {
	Charges
	reads atomic.Int64
}

func (c *countingCharges) ChargeStatusAmong(ctx context.Context, m payment.Merchant, keySession uuid.UUID, key string) (*payment.Result, error) {
	c.reads.Add(1)
	return c.Charges.ChargeStatusAmong(ctx, m, keySession, key)
}

// pokedHub is the hub of the instance that commits (never Run: it neither
// LISTENs nor, with noPoll, polls), reading through a counter: each read
// it makes comes from a watch or from a poke of a commit.
func pokedHub(b *bundle, cfg Config) (*Hub, *countingCharges) {
	counted := &countingCharges{Charges: b.svc}
	cfg.PollInterval, cfg.Self = noPoll, b.notifier.ID
	h := NewHub(b.pool, counted, cfg)
	b.notifier.OnCommit(h.Poke)
	return h, counted
}

func TestHub_ManyWatchersOfOneAttempt_OneReadServesThemAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const watchers = 1000
	h, counted := pokedHub(b, Config{MaxWatchersPerAttempt: watchers})
	t.Cleanup(h.Close)
	b.processing(t, "k")

	// The first watch reads the attempt and starts its follower; the others,
	// at once, join it.
	all := make([]<-chan payment.Result, watchers)
	var err error
	all[0], err = h.Watch(context.Background(), b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, watchers)
	for i := 1; i < watchers; i++ {
		wg.Go(func() { all[i], errs[i] = h.Watch(context.Background(), b.merchant, uuid.Nil, "k") })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "watch %d", i)
	}
	require.Equal(t, watchers, h.Watchers())
	for i, states := range all {
		first, ok := next(t, states)
		require.True(t, ok, "watcher %d", i)
		require.Equal(t, payment.StatusProcessing, first.Status, "watcher %d: the current state at once", i)
	}
	require.EqualValues(t, 1, counted.reads.Load(), "one read for a thousand watches")

	// The commit pokes the follower: one read, and every watcher hears it.
	b.reconcile(t)
	chargeID := b.status(t, "k").Charge.ID
	for i, states := range all {
		got := requireStates(t, states, payment.StatusSucceeded)
		require.Equal(t, chargeID, got[0].Charge.ID, "watcher %d", i)
	}
	require.Eventually(t, func() bool { return h.Watchers() == 0 }, watchWithin, 10*time.Millisecond)
	require.EqualValues(t, 2, counted.reads.Load(), "one more read for the change, not one per watcher")
}

func TestHub_WatchersPerAttempt_Bounded_OtherAttemptsStillServed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, counted := pokedHub(b, Config{MaxWatchersPerAttempt: 2})
	t.Cleanup(h.Close)
	b.processing(t, "held")
	b.processing(t, "shopper")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		_, err := h.Watch(ctx, b.merchant, uuid.Nil, "held")
		require.NoError(t, err)
	}
	readsBefore := counted.reads.Load()
	for range 100 {
		_, err := h.Watch(ctx, b.merchant, uuid.Nil, "held")
		require.Equal(t, payment.ELIMITED, payment.ErrorCode(err))
		var limited *payment.Error
		require.ErrorAs(t, err, &limited)
		require.Contains(t, limited.Message, "one charge attempt on this server holds at most 2")
		require.Positive(t, limited.RetryAfter)
	}
	require.Equal(t, readsBefore, counted.reads.Load(), "a refused watch reads nothing")

	states, err := h.Watch(ctx, b.merchant, uuid.Nil, "shopper")
	require.NoError(t, err, "another attempt of the same merchant has its own share")
	first, _ := next(t, states)
	require.Equal(t, payment.StatusProcessing, first.Status)
	require.Equal(t, 3, h.Watchers())
}

func TestHub_OneWatcherLeaves_TheOthersStillHearTheEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, _ := pokedHub(b, Config{})
	t.Cleanup(h.Close)
	b.processing(t, "k")

	leaving, leave := context.WithCancel(context.Background())
	gone, err := h.Watch(leaving, b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	staying, err := h.Watch(context.Background(), b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	for _, states := range []<-chan payment.Result{gone, staying} {
		first, _ := next(t, states)
		require.Equal(t, payment.StatusProcessing, first.Status)
	}
	leave()
	_, ok := next(t, gone)
	require.False(t, ok, "closed, with nothing more")
	require.Eventually(t, func() bool { return h.Watchers() == 1 }, watchWithin, 10*time.Millisecond)

	b.reconcile(t)
	requireStates(t, staying, payment.StatusSucceeded)

	// The follower ended with its final state: a new watch reads the
	// attempt afresh and gets it at once.
	again, err := h.Watch(context.Background(), b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	requireStates(t, again, payment.StatusSucceeded)
}

// TestHub_APagesAttempt_IsFollowedAmongItsSessionsKeys: a page's key is
// its session's, so the same key string may name another attempt among
// the merchant's own keys. Each watch follows its own attempt, and a
// commit pokes the follower of exactly the attempt it finalized.
func TestHub_APagesAttempt_IsFollowedAmongItsSessionsKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, counted := pokedHub(b, Config{})
	t.Cleanup(h.Close)
	ctx := context.Background()
	sess, err := b.svc.CreateCheckoutSession(ctx, b.merchant, merchant.SessionSeed("demo-key"), "cart", payment.SessionInput{Amount: 700, Currency: "USD"})
	require.NoError(t, err)
	paid, err := b.svc.ChargeCheckoutSession(ctx, b.merchant, payment.SessionKeys, "k", sess.ClientSecret, payment.SessionCharge{PaymentMethod: "pm_card_lostResponse"})
	require.NoError(t, err)
	require.Equal(t, payment.StatusProcessing, paid.Status)
	b.processing(t, "k") // the merchant's own "k": another attempt

	page, err := h.Watch(ctx, b.merchant, sess.Session.ID, "k")
	require.NoError(t, err)
	own, err := h.Watch(ctx, b.merchant, uuid.Nil, "k")
	require.NoError(t, err)
	for _, states := range []<-chan payment.Result{page, own} {
		first, _ := next(t, states)
		require.Equal(t, payment.StatusProcessing, first.Status)
	}
	require.EqualValues(t, 2, counted.reads.Load(), "two attempts, one read each")
	b.reconcile(t) // finalizes both, each announcing its own attempt
	requireStates(t, page, payment.StatusSucceeded)
	requireStates(t, own, payment.StatusSucceeded)
	require.EqualValues(t, 4, counted.reads.Load(), "each follower read its attempt once more, when its commit poked it")
}
