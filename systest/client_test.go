package systest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// What the tests ask of a server from outside: charges through its API,
// the simulated provider's ground truth, its metrics, and its database.

func newKey() string { return uuid.NewString() }

func visa(amount int) apiclient.ChargeCardInput {
	return apiclient.ChargeCardInput{Amount: new(amount), Currency: new("USD"), PaymentMethod: "pm_card_visa"}
}

func withPaymentMethod(pm string) apiclient.ChargeCardInput {
	in := visa(1999)
	in.PaymentMethod = pm
	return in
}

// chargeCard charges in with key as the merchant of apiKey, and requires
// an answer without errors.
func (s *server) chargeCard(t *testing.T, apiKey, key string, in apiclient.ChargeCardInput) *apiclient.ChargeResult {
	t.Helper()
	r, err := s.client(apiKey).ChargeCard(t.Context(), key, in)
	require.NoError(t, err)
	return r
}

// chargeStatus is the demo merchant's attempt of key; nil when there is
// none.
func (s *server) chargeStatus(t *testing.T, key string) *apiclient.ChargeResult {
	t.Helper()
	r, err := s.demo().ChargeStatus(t.Context(), key)
	require.NoError(t, err)
	return r
}

// finalStatus polls chargeStatus until the demo merchant's attempt of key
// leaves PROCESSING.
func (s *server) finalStatus(t *testing.T, key string, within time.Duration) *apiclient.ChargeResult {
	t.Helper()
	var final *apiclient.ChargeResult
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := s.demo().ChargeStatus(t.Context(), key)
		if assert.NoError(c, err) && assert.NotNil(c, r, "no attempt %s", key) &&
			assert.NotEqual(c, apiclient.Processing, r.Status, "attempt %s still not final", key) {
			final = r
		}
	}, within, 50*time.Millisecond)
	return final
}

// providerCharges lists the charges the simulated provider of s made for
// a client key of the demo merchant: the ground truth of how often money
// moved.
func (s *server) providerCharges(t *testing.T, key string) []apiclient.ProviderCharge {
	t.Helper()
	charges, err := s.demo().ProviderCharges(t.Context(), apiclient.DemoMerchant, key)
	require.NoError(t, err)
	return charges
}

// onlyCode is the extensions.code of err when it is an answer with
// exactly one error; "" otherwise.
func onlyCode(err error) string {
	var e *apiclient.Error
	if errors.As(err, &e) && len(e.Errors) == 1 {
		return e.Code()
	}
	return ""
}

// requireConnectionDied requires that a request got no answer at all: its
// connection died under it.
func requireConnectionDied(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err, "the client sees the connection die, not an answer")
	var answer *apiclient.Error
	require.False(t, errors.As(err, &answer), "an answer came: %v", err)
}

// queryOne runs a query of one row and one column, and returns its value.
func queryOne[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	values := dbtest.Query[T](t, pool, sql, args...)
	require.Len(t, values, 1, "one row from %q", sql)
	return values[0]
}

// countRows runs a count query.
func countRows(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	return queryOne[int](t, pool, sql, args...)
}

// waitRows waits until the count query says want.
func waitRows(t *testing.T, pool *pgxpool.Pool, want int, within time.Duration, sql string, args ...any) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int
		if assert.NoError(c, pool.QueryRow(t.Context(), sql, args...).Scan(&n)) {
			assert.Equal(c, want, n, "from %q", sql)
		}
	}, within, 50*time.Millisecond)
}

// attemptStatus is the stored status of the attempt of key.
func attemptStatus(t *testing.T, pool *pgxpool.Pool, key string) string {
	t.Helper()
	return queryOne[string](t, pool, "SELECT status FROM charge_attempts WHERE idempotency_key = $1", key)
}
