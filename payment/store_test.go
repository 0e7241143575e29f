package payment

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

func TestStore_FinalizeIsFencedOnAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	s := newStore(pool)
	m, err := NewMerchants(pool, true).EnsureDevelopmentKey(ctx, "fence", "fence-key")
	require.NoError(t, err)
	in := ChargeInput{Amount: 100, Currency: "USD", PaymentMethod: "pm_card_visa"}
	a, claimed, err := s.claim(ctx, newAttempt(m, "k", in, time.Now(), time.Minute, time.Hour))
	require.NoError(t, err)
	require.True(t, claimed)
	require.Equal(t, int32(1), a.Number)

	other := in
	other.Amount = 200
	_, claimed, err = s.claim(ctx, newAttempt(m, "k", other, time.Now(), time.Minute, time.Hour))
	require.NoError(t, err)
	require.False(t, claimed, "a second claim of the key gets nothing")

	stale := a
	stale.Number++
	_, err = s.succeed(ctx, stale, "ch_stale", time.Now().Add(time.Hour))
	require.ErrorIs(t, err, errFenced, "a holder with another attempt number writes nothing")
	_, err = s.fail(ctx, stale, Failure{Code: "card_declined", Message: "no"}, time.Now().Add(time.Hour))
	require.ErrorIs(t, err, errFenced)

	done, err := s.succeed(ctx, a, "ch_real", time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, done.Status)
	require.Equal(t, "ch_real", done.Charge.ProviderChargeID)
	_, err = s.succeed(ctx, a, "ch_again", time.Now().Add(time.Hour))
	require.ErrorIs(t, err, errFenced, "a finalized attempt is never written again")
	_, err = s.fail(ctx, a, Failure{Code: "card_declined", Message: "no"}, time.Now().Add(time.Hour))
	require.ErrorIs(t, err, errFenced)

	charges := queryAll[string](t, pool, "SELECT provider_charge_id FROM charges ORDER BY created_at")
	require.Equal(t, []string{"ch_real"}, charges, "fenced writes left no charge behind")
}

// queryAll runs a one-column query and returns its values.
func queryAll[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []T {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	values, err := pgx.CollectRows(rows, pgx.RowTo[T])
	require.NoError(t, err)
	return values
}
