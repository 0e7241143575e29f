package apitest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// CountRows runs a count query.
func CountRows(t require.TestingT, pool *pgxpool.Pool, sql string, args ...any) int {
	Helper(t)
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// WaitRows waits until the count query says want.
func WaitRows(t *testing.T, pool *pgxpool.Pool, want int, within time.Duration, sql string, args ...any) {
	t.Helper()
	var n int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n = CountRows(c, pool, sql, args...)
		require.Equal(c, want, n)
	}, within, 50*time.Millisecond, "want %d from %q", want, sql)
}

// StoredProviderKey is the attempt of a client key, and the provider key it
// stores (charge_attempt_provider_key: a row keeps NULL for the first).
func StoredProviderKey(t *testing.T, dbURL, clientKey string) (attemptID, providerKey string) {
	t.Helper()
	require.NoError(t, dbtest.Open(t, dbURL).QueryRow(context.Background(),
		`SELECT id::text, charge_attempt_provider_key(a) FROM charge_attempts a
			WHERE idempotency_key = $1`, clientKey).Scan(&attemptID, &providerKey))
	return attemptID, providerKey
}

func AttemptStatus(t *testing.T, pool *pgxpool.Pool, key string) string {
	t.Helper()
	var status string
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT status FROM charge_attempts WHERE idempotency_key = $1", key).Scan(&status))
	return status
}
