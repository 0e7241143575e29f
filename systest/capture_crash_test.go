package systest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// crashBetweenProviderAndRecord sends one operation (a capture or a void)
// of an authorization to a server that dies of SIGKILL right after the
// provider answered it, then has a fresh server's reconciler record it,
// and returns the retry's answer under the same key, through send.
func crashBetweenProviderAndRecord(t *testing.T, send func(s *server, key, charge string) (string, bool, error)) (provider *server, charge, key string) {
	t.Helper()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	// The provider runs in a process of its own: the crash takes down
	// chargeonce, not the provider.
	provider = startServer(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h"})
	providerURL := provider.URL + "/provider"
	in := withPaymentMethod("pm_card_visa")
	in.CaptureMethod = new(apiclient.CaptureMethodManual)
	authorized := provider.chargeCard(t, apiclient.DemoAPIKey, newKey(), in)
	require.Equal(t, "SUCCEEDED", authorized.Status)
	charge = authorized.Charge.Id

	doomed := startServer(t, withCrash(map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": providerURL}, "after-provider"))
	key = newKey()
	_, _, err := send(doomed, key, charge)
	require.Error(t, err, "the client sees the connection die, not an answer")
	requireKilled(t, doomed.Process, 10*time.Second, "the server died of SIGKILL after the provider answered")

	survivor := startServer(t, map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": providerURL})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var status string
		if assert.NoError(c, pool.QueryRow(t.Context(), `SELECT status FROM charge_attempts WHERE idempotency_key = $1`, key).Scan(&status)) {
			assert.Equal(c, "SUCCEEDED", status)
		}
	}, 15*time.Second, 100*time.Millisecond) // lease 2s + interval 200ms, with room
	status, replayed, err := send(survivor, key, charge)
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", status)
	require.True(t, replayed, "the retry is the reconciler's record")
	return provider, charge, key
}

func TestCrash_KilledBetweenTheProvidersCaptureAndItsRecord_OneCaptureUnderTheOriginalKey(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	capture := func(s *server, key, charge string) (string, bool, error) {
		final := true
		amount := 600
		res, err := s.demo().CaptureCharge(t.Context(), key, apiclient.CaptureInput{ChargeId: charge, Amount: &amount, Final: &final})
		if err != nil {
			return "", false, err
		}
		return string(res.Status), res.Replayed, nil
	}
	provider, charge, key := crashBetweenProviderAndRecord(t, capture)
	captures, err := provider.demo().ListProviderCaptures(t.Context(), apiclient.ProviderCaptureFilter{})
	require.NoError(t, err)
	require.Len(t, captures, 1, "one capture at the provider")
	attempt, err := provider.demo().CaptureStatus(t.Context(), key)
	require.NoError(t, err)
	require.Equal(t, 600, attempt.Capture.Amount)
	require.Equal(t, charge, attempt.Capture.ChargeId)
	require.Equal(t, "chargeonce_"+captures[0].Metadata["chargeonce_attempt_id"], captures[0].IdempotencyKey,
		"the capture was made under the attempt's own provider key, the one it was first sent under")
	require.Equal(t, 600, int(captures[0].Amount))
	require.Equal(t, apiclient.CaptureStatusCaptured, attempt.Charge.CaptureStatus)
	require.Equal(t, 600, attempt.Charge.AmountCaptured)
}

func TestCrash_KilledBetweenTheProvidersVoidAndItsRecord_OneVoid(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	void := func(s *server, key, charge string) (string, bool, error) {
		res, err := s.demo().VoidCharge(t.Context(), key, apiclient.VoidInput{ChargeId: charge})
		if err != nil {
			return "", false, err
		}
		return string(res.Status), res.Replayed, nil
	}
	provider, charge, key := crashBetweenProviderAndRecord(t, void)
	voids, err := provider.demo().ListProviderVoids(t.Context(), apiclient.ProviderVoidFilter{})
	require.NoError(t, err)
	require.Len(t, voids, 1, "one void at the provider")
	require.Equal(t, "chargeonce_"+voids[0].Metadata["chargeonce_attempt_id"], voids[0].IdempotencyKey)
	attempt, err := provider.demo().VoidStatus(t.Context(), key)
	require.NoError(t, err)
	require.Equal(t, charge, attempt.Void.ChargeId)
	require.Equal(t, apiclient.CaptureStatusVoided, attempt.Charge.CaptureStatus)
}
