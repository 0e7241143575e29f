package payment

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// TestChargeCard_PoolExhausted_IsUnavailableAndChargesNothing takes the
// only connection of the service's pool: a charge waits StoreTimeout at
// most, answers EUNAVAILABLE with a retry hint, and claims and charges
// nothing; once the connection is back, the same request charges once.
func TestChargeCard_PoolExhausted_IsUnavailableAndChargesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDatabase(t))
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	provider := newMemory(t, time.Now, 0) // the provider keeps its state apart from ours
	svc := NewService(pool, provider, Config{StoreTimeout: 200 * time.Millisecond})
	m, err := newMerchant(ctx, pool, "demo")
	require.NoError(t, err)

	held, err := pool.Acquire(ctx)
	require.NoError(t, err)
	start := time.Now()
	_, err = svc.ChargeCard(ctx, m, "k", visa(100))
	took := time.Since(start)
	require.Equal(t, EUNAVAILABLE, ErrorCode(err), "%v", err)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Positive(t, e.RetryAfter)
	require.Less(t, took, 2*time.Second, "it did not queue behind the pool")
	_, err = svc.ChargeStatus(ctx, m, "k")
	require.Equal(t, EUNAVAILABLE, ErrorCode(err))

	var attempts int
	require.NoError(t, held.QueryRow(ctx, "SELECT count(*) FROM charge_attempts").Scan(&attempts))
	require.Zero(t, attempts, "nothing was claimed")
	require.Empty(t, provider.Charges("", ""), "nothing was charged")
	held.Release()

	r, err := svc.ChargeCard(ctx, m, "k", visa(100))
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, r.Status)
	require.Len(t, provider.Charges("", ""), 1)
}

// TestChargeCard_RetryTakesOverAnAttemptNobodyHolds: an attempt whose holder
// died (its lease ended) is taken over by the next retry with the same key,
// which settles it at once; of many concurrent retries exactly one takes it
// over, and the card is charged once.
func TestChargeCard_RetryTakesOverAnAttemptNobodyHolds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	a := b.abandon(t, "k", visa(700))

	r, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(700))
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status, "while the lease holds, nobody takes over")
	require.Zero(t, b.providerCharges(t, "k"))

	b.clock.AdvancePast(a.LockedUntil)
	results := make(chan Result, 20)
	for range 20 {
		go func() {
			r, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(700))
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	succeeded := 0
	for range 20 {
		if r := <-results; r.Status == StatusSucceeded {
			succeeded++
		}
	}
	require.Positive(t, succeeded)
	require.Equal(t, 1, b.providerCharges(t, "k"), "one takeover, one charge")
	var attempt int32
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT fence FROM charge_attempts WHERE idempotency_key = 'k'").Scan(&attempt))
	require.Equal(t, int32(2), attempt, "taken over exactly once")
	require.Equal(t, StatusSucceeded, b.status(t, "k").Status)
}
