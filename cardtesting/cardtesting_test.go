package cardtesting

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"chargeonce/metrics"
	"chargeonce/payment"
)

// clock is a time that only the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type bundle struct {
	guard      *Guard
	clock      *clock
	metrics    *metrics.Metrics
	suspicions chan Suspicion
}

// setup is a Guard of 3 declines per address (next to no refill) and 5 per
// key before suspicion, on a clock of its own.
func setup(t *testing.T) bundle {
	t.Helper()
	b := bundle{clock: &clock{now: time.Unix(1_700_000_000, 0)}, metrics: metrics.Discard(), suspicions: make(chan Suspicion, 100)}
	b.guard = New(Config{
		AddressRate: 0.0001, AddressBurst: 3, KeyRate: 0.0001, KeyBurst: 5, SuspicionWindow: time.Minute,
		Suspected: func(_ context.Context, s Suspicion) { b.suspicions <- s },
		Metrics:   b.metrics, Now: b.clock.Now,
	})
	return b
}

var acme = payment.Merchant{ID: uuid.New(), Name: "acme"}

func (b bundle) take(t *testing.T, address string) (Ticket, bool) {
	t.Helper()
	ticket, ok, wait := b.guard.Take(address)
	if !ok {
		require.Positive(t, wait, "a refusal says how long to wait")
	}
	return ticket, ok
}

func TestGuard_TakenBeforeGivenBackAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := uuid.New()
	// Charges that succeed give their allowance back: an address that pays
	// pays forever.
	for i := range 20 {
		ticket, ok := b.take(t, "10.0.0.1")
		require.True(t, ok, "payment %d", i)
		ticket.Release()
	}
	// Declines keep it: three, then refused before anything runs.
	for i := range 3 {
		ticket, ok := b.take(t, "10.0.0.1")
		require.True(t, ok, "decline %d", i)
		ticket.Declined(context.Background(), acme, key)
	}
	_, ok := b.take(t, "10.0.0.1")
	require.False(t, ok)
	_, ok = b.take(t, "10.0.0.2")
	require.True(t, ok, "addresses have allowances of their own")
	// A guess keeps it too.
	for range 3 {
		ticket, _ := b.take(t, "10.0.0.3")
		ticket.Guessed()
	}
	_, ok = b.take(t, "10.0.0.3")
	require.False(t, ok, "guessed client secrets spend what declines spend")
}

func TestGuard_ConcurrentWave_NoMoreThanTheBurstRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := uuid.New()
	// 30 declines at once from one address: checked and spent in one step,
	// so only the burst runs, whatever the interleaving.
	var ran atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 30 {
		wg.Go(func() {
			<-start
			ticket, ok, _ := b.guard.Take("10.0.0.9")
			if !ok {
				return
			}
			ran.Add(1)
			ticket.Declined(context.Background(), acme, key)
		})
	}
	close(start)
	wg.Wait()
	require.Equal(t, int32(3), ran.Load())
}

func TestGuard_OthersDeclines_NeverRefuseACleanAddress_TheyRaiseASuspicion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := uuid.New()
	// Twenty addresses decline once each: the key's five are spent four
	// times over, and card testing is suspected once.
	for i := range 20 {
		ticket, ok := b.take(t, fmt.Sprintf("10.1.0.%d", i))
		require.True(t, ok)
		ticket.Declined(context.Background(), acme, key)
	}
	s := <-b.suspicions
	require.Equal(t, acme.ID, s.Merchant.ID)
	require.Equal(t, key, s.KeyID)
	require.Equal(t, time.Minute, s.Until.Sub(s.At))
	require.Empty(t, b.suspicions, "one suspicion per window")

	// A shopper who has declined nothing pays, as many times as they like.
	for i := range 10 {
		ticket, ok := b.take(t, "10.2.0.1")
		require.True(t, ok, "clean shopper's payment %d", i)
		ticket.Release()
	}
	// While suspected, a decline costs its address two: one decline, then
	// one more attempt, then refused.
	ticket, _ := b.take(t, "10.2.0.2")
	ticket.Declined(context.Background(), acme, key)
	ticket, ok := b.take(t, "10.2.0.2")
	require.True(t, ok)
	ticket.Declined(context.Background(), acme, key)
	_, ok = b.take(t, "10.2.0.2")
	require.False(t, ok, "two declines spent four of three")

	// After the window a new suspicion may be raised, once.
	b.clock.advance(time.Minute)
	ticket, _ = b.take(t, "10.3.0.1")
	ticket.Declined(context.Background(), acme, key)
	ticket, _ = b.take(t, "10.3.0.2")
	ticket.Declined(context.Background(), acme, key)
	require.Len(t, b.suspicions, 1)
	require.Equal(t, 2.0, testutil.ToFloat64(b.metrics.CardTestingSuspected))
}

func TestGuard_Nil_RationsNothing(t *testing.T) {
	t.Parallel()
	var g *Guard
	ticket, ok, _ := g.Take("10.0.0.1")
	require.True(t, ok)
	ticket.Declined(context.Background(), acme, uuid.New())
	ticket.Guessed()
	ticket.Release()
}
