package payment

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stretchr/testify/require"
)

// A retry storm replays from memory: once an instance has read a finished
// attempt, its replays need no database, so they are answered even while
// the database is away, and are still refused for another request or
// another merchant.
func TestChargeCard_ReplayOfAFinishedKey_IsAnsweredFromMemory(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	first, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, first.Status)
	declined, err := b.svc.ChargeCard(ctx, b.merchant, "d", card("pm_card_declined"))
	require.NoError(t, err)
	require.Equal(t, StatusFailed, declined.Status)
	// The first replays read the database, and remember what they read.
	for _, key := range []string{"k", "d"} {
		in := visa(900)
		if key == "d" {
			in = card("pm_card_declined")
		}
		r, err := b.svc.ChargeCard(ctx, b.merchant, key, in)
		require.NoError(t, err)
		require.True(t, r.Replayed)
	}
	other, err := newMerchant(ctx, b.pool, "other")
	require.NoError(t, err)

	b.pool.Close() // every read from the database fails from now on

	replay, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.NoError(t, err)
	require.True(t, replay.Replayed)
	require.Equal(t, StatusSucceeded, replay.Status)
	require.Equal(t, first.Charge, replay.Charge)
	failed, err := b.svc.ChargeCard(ctx, b.merchant, "d", card("pm_card_declined"))
	require.NoError(t, err)
	require.Equal(t, declined.Failure, failed.Failure)
	status, err := b.svc.ChargeStatus(ctx, b.merchant, "k")
	require.NoError(t, err)
	require.Equal(t, first.Charge, status.Charge)

	_, err = b.svc.ChargeCard(ctx, b.merchant, "k", visa(901))
	require.Equal(t, EKEYREUSED, ErrorCode(err), "another request under the key is still refused")
	_, err = b.svc.ChargeCard(ctx, other, "k", visa(900))
	require.ErrorContains(t, err, "closed pool", "another merchant's key of the same name is not this one: only the database could answer")

	// At expiry the key may be deleted and claimed anew: only the database knows.
	b.clock.AdvancePast(replay.ExpiresAt)
	_, err = b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.ErrorContains(t, err, "closed pool")
}

// An attempt in progress is never remembered: each read of it asks the
// database, so its end is seen at once.
func TestChargeCard_ProcessingAttempt_IsNeverServedFromMemory(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	b.abandon(t, "p", visa(300))
	r, err := b.svc.ChargeCard(ctx, b.merchant, "p", visa(300))
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)
	require.Equal(t, StatusProcessing, b.status(t, "p").Status)

	b.clock.Advance(b.svc.cfg.Lease + time.Second)
	res, err := NewReconciler(b.svc, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Succeeded)

	require.Equal(t, StatusSucceeded, b.status(t, "p").Status)
	r, err = b.svc.ChargeCard(ctx, b.merchant, "p", visa(300))
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, r.Status)
}

func TestChargeCard_ResultCacheOff_ReplaysReadTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{ResultCacheSize: -1})
	ctx := context.Background()
	_, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.NoError(t, err)
	r, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.NoError(t, err)
	require.True(t, r.Replayed)
	b.pool.Close()
	_, err = b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.ErrorContains(t, err, "closed pool", "without the cache, a replay reads the database")
}

func TestFinishedCache_IsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{ResultCacheSize: 2})
	ctx := context.Background()
	for _, key := range []string{"a", "b", "c"} {
		_, err := b.svc.ChargeCard(ctx, b.merchant, key, visa(100))
		require.NoError(t, err)
		_, err = b.svc.ChargeCard(ctx, b.merchant, key, visa(100))
		require.NoError(t, err)
	}
	require.Equal(t, 2, b.svc.finished.entries.Len())
	_, ok := b.svc.finished.get(b.merchant.ID, uuid.Nil, "a", b.clock.Now())
	require.False(t, ok, "the least recently used went first")
	_, ok = b.svc.finished.get(b.merchant.ID, uuid.Nil, "c", b.clock.Now())
	require.True(t, ok)
}

// A replay of a settled charge offers its answer to be given again
// (Result.Replay), counted by Replayed until the result expires; an
// attempt in progress never does.
func TestReplayed_UntilTheResultExpires_OnlyForASettledAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	first, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.NoError(t, err)
	require.Nil(t, first.Replay, "the first answer is no replay")
	replay, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.NoError(t, err)
	require.NotNil(t, replay.Replay)
	require.True(t, b.svc.Replayed(ctx, replay.Replay, true))
	b.clock.AdvancePast(replay.ExpiresAt)
	require.False(t, b.svc.Replayed(ctx, replay.Replay, true), "expired: the key may be claimed anew")

	b.abandon(t, "p", visa(300))
	processing, err := b.svc.ChargeCard(ctx, b.merchant, "p", visa(300))
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, processing.Status)
	require.Nil(t, processing.Replay)

	uncached := setup(t, Config{ResultCacheSize: -1})
	_, err = uncached.svc.ChargeCard(ctx, uncached.merchant, "k", visa(900))
	require.NoError(t, err)
	again, err := uncached.svc.ChargeCard(ctx, uncached.merchant, "k", visa(900))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.NotNil(t, again.Replay, "without the cache too: its answer may be kept in the database")
	require.False(t, uncached.svc.KeepsResults())
	require.True(t, b.svc.KeepsResults())
}
