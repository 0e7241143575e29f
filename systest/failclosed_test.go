package systest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// TestDatabaseDown_ChargesNothingAndRecoversByItself stops chargeonce's real
// PostgreSQL: chargeCard and chargeStatus answer SERVICE_UNAVAILABLE with a
// retry hint (HTTP 503, Retry-After), nothing reaches the card provider, and
// /readyz is red; once PostgreSQL is back, /readyz turns green and the same
// key charges once, without restarting chargeonce.
func TestDatabaseDown_ChargesNothingAndRecoversByItself(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	pg, dbURL := startOwnPostgres(t)
	// The provider keeps its state on the shared test server, which stays up.
	provider := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t)})
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": provider.URL + "/provider"})
	require.Equal(t, "SUCCEEDED", s.chargeCard(t, apiclient.DemoAPIKey, newKey(), visa(100)).Status)

	require.NoError(t, pg.Stop(context.Background()))
	key := newKey()
	for name, call := range map[string]func() error{
		"chargeCard": func() error {
			_, err := s.demo().ChargeCard(t.Context(), key, visa(1999))
			return err
		},
		"chargeStatus": func() error {
			_, err := s.demo().ChargeStatus(t.Context(), key)
			return err
		},
	} {
		var answer *apiclient.Error
		require.ErrorAs(t, call(), &answer, name)
		require.Equal(t, http.StatusServiceUnavailable, answer.Status, "%s: %v", name, answer)
		require.NotEmpty(t, answer.RetryAfterHeader, name)
		require.Len(t, answer.Errors, 1, name)
		require.Equal(t, "SERVICE_UNAVAILABLE", answer.Code(), name)
		require.Positive(t, answer.RetryAfter(), name)
		require.NotContains(t, answer.Errors[0].Message, "127.0.0.1", "%s: no internals", name)
	}
	resp, err := s.HTTP.Get(s.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "/readyz is red")
	require.Empty(t, provider.providerCharges(t, key), "nothing was charged")

	require.NoError(t, pg.Restart(context.Background()))
	require.Eventually(t, func() bool { return s.demo().Ready(t.Context()) == nil },
		15*time.Second, 50*time.Millisecond, "/readyz turns green by itself")
	p := s.chargeCard(t, apiclient.DemoAPIKey, key, visa(1999))
	require.Equal(t, "SUCCEEDED", p.Status)
	require.False(t, p.Replayed)
	require.Len(t, provider.providerCharges(t, key), 1)
	require.NotContains(t, s.Output(), "level=ERROR", "an outage is not a bug")
}
