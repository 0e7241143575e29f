package payment

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/history"
)

// An answer kept for a replay is read back, on another instance, by the
// merchant and the request's hash alone, and counted as a replay of its
// key until the key's result expires; the retention forgets it with the
// attempt.
func TestStoredAnswer_KeptForOneRequest_ReadByAnotherInstance_ForgottenWithItsAttempt(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{Retention: time.Hour}, "i-1")
	ctx := context.Background()
	_, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.NoError(t, err)
	replay, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(900))
	require.NoError(t, err)
	require.NotNil(t, replay.Replay)

	hash := []byte("the request's hash")
	b.svc.KeepAnswer(replay.Replay, hash, "Pay", []byte(`{"data":{}}`))
	// Another instance on the same database, which never saw the key.
	other := NewService(b.pool, b.provider, Config{Now: b.clock.Now, Retention: time.Hour, History: b.svc.cfg.History})
	var got StoredAnswer
	require.Eventually(t, func() bool {
		var ok bool
		got, ok, err = other.StoredAnswer(ctx, b.merchant.ID, hash)
		require.NoError(t, err)
		return ok
	}, 10*time.Second, 10*time.Millisecond, "the answer is written")
	require.Equal(t, "Pay", got.Operation)
	require.JSONEq(t, `{"data":{}}`, string(got.Answer))

	_, ok, err := other.StoredAnswer(ctx, b.merchant.ID, []byte("another request"))
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = other.StoredAnswer(ctx, uuid.New(), hash)
	require.NoError(t, err)
	require.False(t, ok, "another merchant's request")

	require.True(t, other.Replayed(ctx, got.Replay, false))
	events, _ := b.timeline(t, KindCharge, "k")
	replays := find(events, history.Replayed)
	require.Len(t, replays, 1)
	require.Equal(t, 2, replays[0].Count, "the replay that rendered it, and the one given the stored answer")
	b.clock.AdvancePast(got.Replay.attempt.ExpiresAt)
	require.False(t, other.Replayed(ctx, got.Replay, false), "expired: the key may be claimed anew")

	b.clock.Advance(time.Hour) // the retention reads ids, made on the machine's clock
	n, err := b.svc.deleteExpired(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, ok, err = other.StoredAnswer(ctx, b.merchant.ID, hash)
	require.NoError(t, err)
	require.False(t, ok, "forgotten with its attempt")
}
