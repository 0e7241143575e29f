package payment

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// noPoll is a poll interval no test waits for: what arrives came by a
// notification (or a reconnect).
const noPoll = time.Hour

// watchWithin bounds every wait for a watcher: generous, the machine is noisy.
const watchWithin = 30 * time.Second

// startHub runs a hub on b's service until the test ends.
func startHub(t *testing.T, b *bundle, cfg HubConfig) *Hub {
	t.Helper()
	h := NewHub(b.svc, cfg)
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
	require.Equal(t, StatusProcessing, r.Status)
}

// reconcile runs one reconciler pass, which finalizes every released attempt.
func (b *bundle) reconcile(t *testing.T) {
	t.Helper()
	b.clock.Advance(time.Millisecond)
	_, err := NewReconciler(b.svc, ReconcilerConfig{}).RunOnce(context.Background())
	require.NoError(t, err)
}

// next waits for the watcher's next state; ok is false when it closed.
func next(t *testing.T, states <-chan Result) (Result, bool) {
	t.Helper()
	select {
	case r, ok := <-states:
		return r, ok
	case <-time.After(watchWithin):
		t.Fatalf("no state and no close within %s", watchWithin)
		return Result{}, false
	}
}

// requireStates reads the watcher to its end and checks the statuses it sent.
func requireStates(t *testing.T, states <-chan Result, want ...Status) []Result {
	t.Helper()
	var got []Result
	for {
		r, ok := next(t, states)
		if !ok {
			break
		}
		got = append(got, r)
	}
	statuses := make([]Status, len(got))
	for i, r := range got {
		statuses[i] = r.Status
	}
	require.Equal(t, want, statuses)
	return got
}

// listenerPIDs are the backends of LISTEN connections (db.Listen names
// them chargeonce-listen) on pool's database.
func listenerPIDs(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	return queryAll[int](t, pool,
		`SELECT pid FROM pg_stat_activity WHERE application_name = 'chargeonce-listen' AND datname = current_database()`)
}

func TestHub_FinalizedElsewhere_NotificationWakesTheWatcher(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	h := startHub(t, b, HubConfig{PollInterval: noPoll})
	b.processing(t, "k")

	states, err := h.Watch(context.Background(), b.merchant, "k")
	require.NoError(t, err)
	first, ok := next(t, states)
	require.True(t, ok)
	require.Equal(t, StatusProcessing, first.Status, "the current state at once")
	require.Equal(t, 1, h.Watchers())

	// Another holder (here a reconciler pass; in production, any instance)
	// finalizes: its commit notifies, and the watcher reads the attempt again.
	b.reconcile(t)
	got := requireStates(t, states, StatusSucceeded)
	require.Equal(t, b.status(t, "k").Charge.ID, got[0].Charge.ID)
	require.Eventually(t, func() bool { return h.Watchers() == 0 }, watchWithin, 10*time.Millisecond, "a final state ends the watcher")
}

func TestHub_AlreadyFinal_OneStateThenClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	h := NewHub(b.svc, HubConfig{PollInterval: noPoll}) // no listener needed
	_, err := b.svc.ChargeCard(context.Background(), b.merchant, "paid", visa(100))
	require.NoError(t, err)
	_, err = b.svc.ChargeCard(context.Background(), b.merchant, "declined", card("pm_card_chargeDeclined"))
	require.NoError(t, err)

	states, err := h.Watch(context.Background(), b.merchant, "paid")
	require.NoError(t, err)
	requireStates(t, states, StatusSucceeded)
	states, err = h.Watch(context.Background(), b.merchant, "declined")
	require.NoError(t, err)
	require.Equal(t, "card_declined", requireStates(t, states, StatusFailed)[0].Failure.Code)
}

func TestHub_UnknownOrOtherMerchantsKey_IsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	h := NewHub(b.svc, HubConfig{})
	other, err := NewMerchants(b.pool, false).addKey(context.Background(), "other", "other-key-123", false)
	require.NoError(t, err)
	b.processing(t, "k")

	for name, m := range map[string]Merchant{"another merchant's key": other, "unknown key": b.merchant} {
		key := "k"
		if name == "unknown key" {
			key = "never-used"
		}
		states, err := h.Watch(context.Background(), m, key)
		require.Nil(t, states, name)
		require.Equal(t, ENOTFOUND, ErrorCode(err), name)
	}
	_, err = h.Watch(context.Background(), b.merchant, "no spaces allowed")
	require.Equal(t, EINVALID, ErrorCode(err))
	require.Zero(t, h.Watchers())
}

func TestHub_MissedNotification_PollFindsTheChange(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	// No notification at all: only the poll can tell the watcher.
	_, err := b.pool.Exec(context.Background(), `DROP TRIGGER charge_events_notify ON charge_events`)
	require.NoError(t, err)
	h := startHub(t, b, HubConfig{PollInterval: 100 * time.Millisecond})
	b.processing(t, "k")
	states, err := h.Watch(context.Background(), b.merchant, "k")
	require.NoError(t, err)
	first, _ := next(t, states)
	require.Equal(t, StatusProcessing, first.Status)

	b.reconcile(t)
	requireStates(t, states, StatusSucceeded)
}

func TestHub_ListenConnectionLost_ReconnectsAndWakesWatchers(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	h := startHub(t, b, HubConfig{PollInterval: noPoll, ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	b.processing(t, "before")
	var lost []int
	require.Eventually(t, func() bool { lost = listenerPIDs(t, b.pool); return len(lost) == 1 }, watchWithin, 20*time.Millisecond)
	before, err := h.Watch(context.Background(), b.merchant, "before")
	require.NoError(t, err)
	first, _ := next(t, before)
	require.Equal(t, StatusProcessing, first.Status)

	// The database drops the LISTEN connection; the attempt is finalized
	// while it may be gone, so its notification may be lost: the watcher
	// learns it when the hub is back and wakes everyone.
	_, err = b.pool.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, lost[0])
	require.NoError(t, err)
	b.reconcile(t)
	requireStates(t, before, StatusSucceeded)
	require.Eventually(t, func() bool {
		pids := listenerPIDs(t, b.pool)
		return len(pids) == 1 && pids[0] != lost[0]
	}, watchWithin, 20*time.Millisecond, "a new LISTEN connection")
}

func TestHub_ListensAgain_AfterReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	h := startHub(t, b, HubConfig{PollInterval: noPoll, ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	var lost []int
	require.Eventually(t, func() bool { lost = listenerPIDs(t, b.pool); return len(lost) == 1 }, watchWithin, 20*time.Millisecond)
	_, err := b.pool.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, lost[0])
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pids := listenerPIDs(t, b.pool)
		return len(pids) == 1 && pids[0] != lost[0]
	}, watchWithin, 20*time.Millisecond, "a new LISTEN connection")

	b.processing(t, "k")
	states, err := h.Watch(context.Background(), b.merchant, "k")
	require.NoError(t, err)
	first, _ := next(t, states)
	require.Equal(t, StatusProcessing, first.Status)
	b.reconcile(t)
	requireStates(t, states, StatusSucceeded)
}

func TestHub_Bounds_RefuseMoreWatchers(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	h := NewHub(b.svc, HubConfig{PollInterval: noPoll, MaxWatchers: 2, MaxWatchersPerMerchant: 1})
	other, err := NewMerchants(b.pool, false).addKey(context.Background(), "other", "other-key-123", false)
	require.NoError(t, err)
	_, err = b.svc.ChargeCard(context.Background(), other, "o", card("pm_card_lostResponse"))
	require.NoError(t, err)
	b.processing(t, "a")
	b.processing(t, "b")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = h.Watch(ctx, b.merchant, "a")
	require.NoError(t, err)
	_, err = h.Watch(ctx, b.merchant, "b")
	require.Equal(t, ELIMITED, ErrorCode(err), "one per merchant")
	var limited *Error
	require.ErrorAs(t, err, &limited)
	require.Positive(t, limited.RetryAfter)
	_, err = h.Watch(ctx, other, "o")
	require.NoError(t, err, "another merchant has its own share")
	_, err = h.Watch(ctx, other, "o")
	require.Equal(t, ELIMITED, ErrorCode(err), "two on the instance")
	require.Equal(t, 2, h.Watchers())

	cancel() // the clients go away
	require.Eventually(t, func() bool { return h.Watchers() == 0 }, watchWithin, 10*time.Millisecond)
	_, err = h.Watch(context.Background(), b.merchant, "b")
	require.NoError(t, err, "room again")
}

func TestHub_Close_EndsWatchersAndBoundContexts(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	h := NewHub(b.svc, HubConfig{PollInterval: noPoll})
	b.processing(t, "k")
	stream, release := h.Bind(context.Background())
	defer release()
	states, err := h.Watch(stream, b.merchant, "k")
	require.NoError(t, err)
	first, _ := next(t, states)
	require.Equal(t, StatusProcessing, first.Status)

	h.Close()
	require.Error(t, stream.Err(), "a bound stream ends with the hub")
	_, ok := next(t, states)
	require.False(t, ok, "the watcher is closed, with nothing more sent")
	require.Zero(t, h.Watchers())
	_, err = h.Watch(context.Background(), b.merchant, "k")
	require.Equal(t, EUNAVAILABLE, ErrorCode(err), "a closed hub refuses new watchers")
	late, releaseLate := h.Bind(context.Background())
	defer releaseLate()
	require.Error(t, late.Err())
}
