package payment

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

func TestReconciler_LostResponse_EndsSucceeded(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	r, err := b.svc.ChargeCard(ctx, b.merchant, "k", card("pm_card_lostResponse"))
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)
	require.Equal(t, b.svc.cfg.ReconcileInterval, r.RetryAfter, "the request gave up: next news comes with the reconciler")

	b.clock.Advance(time.Millisecond)
	res, err := NewReconciler(b.svc, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 1, Succeeded: 1}, res)

	final := b.status(t, "k")
	require.Equal(t, StatusSucceeded, final.Status)
	found, err := b.provider.FindCharges(ctx, ProviderChargeRequest{IdempotencyKey: "chargeonce_" + attemptID(t, b, "k")})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, found[0].ID, final.Charge.ProviderChargeID, "the stored result is what the provider has")
	require.Equal(t, 1, b.providerCharges(t, "k"))

	replay, err := b.svc.ChargeCard(ctx, b.merchant, "k", card("pm_card_lostResponse"))
	require.NoError(t, err)
	require.True(t, replay.Replayed)
	require.Equal(t, final.Charge.ID, replay.Charge.ID)
}

func TestReconciler_ProviderError_FailsAfterRedriveWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RedriveWindow: 10 * time.Minute})
	ctx := context.Background()
	rec := NewReconciler(b.svc, ReconcilerConfig{})
	r, err := b.svc.ChargeCard(ctx, b.merchant, "k", card("pm_card_providerError"))
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)

	b.clock.Advance(time.Minute)
	res, err := rec.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 1, Open: 1}, res, "inside the window it is sent again and stays open")
	require.Equal(t, StatusProcessing, b.status(t, "k").Status)

	b.clock.Advance(10 * time.Minute)
	res, err = rec.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 1, Failed: 1}, res)
	final := b.status(t, "k")
	require.Equal(t, StatusFailed, final.Status)
	require.Equal(t, "provider_unavailable", final.Failure.Code)
	require.Zero(t, b.providerCharges(t, "k"))
}

func TestReconciler_AbandonedBeforeTheProvider_IsSentAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	rec := NewReconciler(b.svc, ReconcilerConfig{})
	a := b.abandon(t, "k", visa(500))

	res, err := rec.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Taken, "a held lease is left alone")
	r := b.status(t, "k")
	require.Equal(t, StatusProcessing, r.Status)
	require.Equal(t, b.svc.cfg.PollInterval, r.RetryAfter, "while the holder works, poll soon")

	b.clock.AdvancePast(a.LockedUntil)
	res, err = rec.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 1, Succeeded: 1}, res)
	require.Equal(t, StatusSucceeded, b.status(t, "k").Status)
	require.Equal(t, 1, b.providerCharges(t, "k"))
}

func TestReconciler_TwoInstances_NeverHandleAnAttemptTwice(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const n = 60
	var latest time.Time
	for i := range n {
		in := visa(int64(100 + i))
		if i%3 == 0 {
			in.PaymentMethod = "pm_card_slow"
		}
		latest = b.abandon(t, uuid.NewString(), in).LockedUntil
	}
	b.clock.AdvancePast(latest)

	// Two instances, each with its own service on the same database and
	// provider, four workers each, small batches: they race for every row.
	other := NewService(b.pool, b.provider, Config{Now: b.clock.Now})
	reconcilers := []*Reconciler{
		NewReconciler(b.svc, ReconcilerConfig{BatchSize: 3}),
		NewReconciler(other, ReconcilerConfig{BatchSize: 3}),
	}
	var taken, succeeded atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for {
				res, err := reconcilers[w%2].RunOnce(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if res.Taken == 0 {
					return
				}
				taken.Add(int64(res.Taken))
				succeeded.Add(int64(res.Succeeded))
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(n), taken.Load(), "every attempt taken exactly once")
	require.Equal(t, int64(n), succeeded.Load())

	attempts := dbtest.Query[int32](t, b.pool, "SELECT fence FROM charge_attempts WHERE status = 'SUCCEEDED'")
	require.Len(t, attempts, n)
	for _, a := range attempts {
		require.Equal(t, int32(2), a, "one takeover per attempt")
	}
	charged := b.provider.ChargeKeys() // one per charge
	require.Len(t, charged, n)
	keys := map[string]bool{}
	for _, k := range charged {
		keys[k] = true
	}
	require.Len(t, keys, n, "one charge per provider key")
}

func TestReconciler_StaleHolderIsFencedOff(t *testing.T) {
	t.Parallel()
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b := setup(t, Config{Fault: func(p FaultPoint) {
		if p == FaultAfterClaim {
			once.Do(func() { close(paused); <-resume }) // the holder stalls, e.g. a long GC pause
		}
	}})
	ctx := context.Background()
	holder := make(chan Result, 1)
	go func() {
		r, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
		if err != nil {
			t.Error(err)
		}
		holder <- r
	}()
	<-paused

	// The lease runs out; the reconciler takes over and settles the attempt.
	b.clock.Advance(b.svc.cfg.Lease + time.Second)
	res, err := NewReconciler(b.svc, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 1, Succeeded: 1}, res)
	settled := b.status(t, "k")

	// The stale holder wakes up and finishes: its write is fenced off, and it
	// answers with what the reconciler stored.
	close(resume)
	late := <-holder
	require.Equal(t, StatusSucceeded, late.Status)
	require.Equal(t, settled.Charge.ID, late.Charge.ID)
	var charges int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM charges").Scan(&charges))
	require.Equal(t, 1, charges, "the late write added no charge")
	require.Equal(t, 1, b.providerCharges(t, "k"))
}

func TestCleaner_ForgetsExpiredResultsButNeverProcessing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Retention: time.Hour})
	ctx := context.Background()
	for _, k := range []string{"ok-1", "ok-2", "ok-3"} {
		_, err := b.svc.ChargeCard(ctx, b.merchant, k, visa(100))
		require.NoError(t, err)
	}
	_, err := b.svc.ChargeCard(ctx, b.merchant, "declined", card("pm_card_chargeDeclined"))
	require.NoError(t, err)
	b.abandon(t, "open", visa(100))
	_, err = b.svc.ChargeCard(ctx, b.merchant, "lost", card("pm_card_providerError"))
	require.NoError(t, err)

	// Two of the four events have gone out to the broker; two wait.
	_, err = b.pool.Exec(ctx, `UPDATE charge_events SET sent_at = $1
		WHERE idempotency_key IN ('ok-1', 'declined')`, b.clock.Now())
	require.NoError(t, err)

	cleaner := NewCleaner(b.svc, CleanerConfig{BatchSize: 2})
	n, err := cleaner.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing has expired yet")

	b.clock.Advance(2 * time.Hour)
	n, err = cleaner.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n, "the three successes and the decline, in batches of two")

	open := dbtest.Query[string](t, b.pool, "SELECT idempotency_key FROM charge_attempts ORDER BY idempotency_key")
	require.Equal(t, []string{"lost", "open"}, open, "PROCESSING attempts are never deleted")
	var charges int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM charges").Scan(&charges))
	require.Equal(t, 3, charges, "charges are the business record and stay")
	unsent := dbtest.Query[string](t, b.pool, "SELECT idempotency_key FROM charge_events ORDER BY idempotency_key")
	require.Equal(t, []string{"ok-2", "ok-3"}, unsent, "sent events are forgotten after the retention; unsent ones never")

	gone, err := b.svc.ChargeStatus(ctx, b.merchant, "ok-1")
	require.NoError(t, err)
	require.Nil(t, gone, "an expired key's result is forgotten")
	again, err := b.svc.ChargeCard(ctx, b.merchant, "ok-1", visa(100))
	require.NoError(t, err)
	require.False(t, again.Replayed, "a forgotten key starts a new attempt")
}

func TestChargeCard_OneOrderOnePayment(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Retention: time.Hour})
	ctx := context.Background()
	order := func(in ChargeInput, id string) ChargeInput { in.OrderID = id; return in }

	paid, err := b.svc.ChargeCard(ctx, b.merchant, "first", order(visa(100), "o-1"))
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, paid.Status)
	_, err = b.svc.ChargeCard(ctx, b.merchant, "reloaded-page", order(visa(100), "o-1"))
	require.Equal(t, EORDERPAID, ErrorCode(err), "a fresh key cannot pay the same order again")
	replay, err := b.svc.ChargeCard(ctx, b.merchant, "first", order(visa(100), "o-1"))
	require.NoError(t, err)
	require.True(t, replay.Replayed, "the original key still replays")

	// A decline frees the order for another try.
	declined, err := b.svc.ChargeCard(ctx, b.merchant, "try-1", order(card("pm_card_chargeDeclined"), "o-2"))
	require.NoError(t, err)
	require.Equal(t, StatusFailed, declined.Status)
	second, err := b.svc.ChargeCard(ctx, b.merchant, "try-2", order(visa(100), "o-2"))
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, second.Status)

	// Even after the key's result is forgotten, the order stays paid.
	b.clock.Advance(2 * time.Hour)
	_, err = NewCleaner(b.svc, CleanerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	_, err = b.svc.ChargeCard(ctx, b.merchant, "much-later", order(visa(100), "o-1"))
	require.Equal(t, EORDERPAID, ErrorCode(err))
	require.Equal(t, 1, b.providerCharges(t, "first"))
	require.Zero(t, b.providerCharges(t, "much-later"))

	// Many keys racing for one order: one payment.
	var wg sync.WaitGroup
	var succeeded, refused atomic.Int64
	for range 20 {
		wg.Go(func() {
			r, err := b.svc.ChargeCard(ctx, b.merchant, uuid.NewString(), order(card("pm_card_slow"), "o-3"))
			switch {
			case err == nil && r.Status == StatusSucceeded:
				succeeded.Add(1)
			case ErrorCode(err) == EORDERPAID:
				refused.Add(1)
			default:
				t.Errorf("unexpected answer %+v, %v", r, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(1), succeeded.Load())
	require.Equal(t, int64(19), refused.Load())
	require.Equal(t, 1, countSucceeded(b.provider.Charges("order_id", "o-3")))
}

// slowProvider answers every call after delay, as a provider under load does.
type slowProvider struct {
	Provider
	delay time.Duration
}

func (p slowProvider) wait(ctx context.Context) error {
	select {
	case <-time.After(p.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p slowProvider) CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error) {
	if err := p.wait(ctx); err != nil {
		return ProviderCharge{}, err
	}
	return p.Provider.CreateCharge(ctx, req)
}

func (p slowProvider) FindCharges(ctx context.Context, req ProviderChargeRequest) ([]ProviderCharge, error) {
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	return p.Provider.FindCharges(ctx, req)
}

// TestReconciler_SlowProvider_NoLeaseExpiresMidBatch gives two reconcilers
// a backlog of stuck attempts and a provider that takes 250 ms a call,
// so that working a pass's batch one attempt after another (12 × 2 calls ×
// 250 ms = 6 s) would outlast the 3 s lease twice over: every attempt must
// still be taken over exactly once, which it would not be if a lease ran out
// while its pass was busy with others.
func TestReconciler_SlowProvider_NoLeaseExpiresMidBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	provider := newMemory(t, time.Now, time.Millisecond)
	newService := func() *Service {
		return NewService(pool, slowProvider{provider, 250 * time.Millisecond}, Config{Lease: 3 * time.Second})
	}
	a, b := newService(), newService()
	m, err := newMerchant(ctx, pool, "demo")
	require.NoError(t, err)
	const n = 12
	for i := range n {
		c, err := a.store.claim(ctx, newChargeAttempt(m, uuid.NewString(), visa(int64(100+i)), time.Now().Add(-time.Minute), time.Second, time.Hour), SessionMaxAttemptsDefault)
		require.NoError(t, err)
		require.Equal(t, claimedByUs, c.outcome)
	}

	start := time.Now()
	var wg sync.WaitGroup
	var taken atomic.Int64
	for _, svc := range []*Service{a, b} {
		rec := NewReconciler(svc, ReconcilerConfig{})
		wg.Go(func() {
			for time.Since(start) < 20*time.Second {
				res, err := rec.RunOnce(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				taken.Add(int64(res.Taken))
				if res.Taken == 0 && time.Since(start) > 5*time.Second { // past a lease
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d takeovers in %s", taken.Load(), time.Since(start).Round(time.Millisecond))
	numbers := dbtest.Query[int32](t, pool, "SELECT fence FROM charge_attempts WHERE status = 'SUCCEEDED'")
	require.Len(t, numbers, n, "every attempt settled")
	for _, number := range numbers {
		require.Equal(t, int32(2), number, "taken over once: no lease ran out while its pass worked on others")
	}
	require.Equal(t, int64(n), taken.Load())
	require.Len(t, provider.Charges("", ""), n)
}
