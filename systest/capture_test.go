package systest

import (
	"strings"
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

func TestOperatorCommands_ChargesUncapturedAndCapturesStuck(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// A server whose own reconciler stays out of the way, so the operator's
	// pass does the work.
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h", "PROCESSING_LEASE": "1s"})
	authorize := func(pm string) string {
		in := withPaymentMethod(pm)
		in.CaptureMethod = new(apiclient.CaptureMethodManual)
		res := s.chargeCard(t, apiclient.DemoAPIKey, newKey(), in)
		require.Equal(t, "SUCCEEDED", res.Status)
		return res.Charge.Id
	}
	shipped, lost := authorize("pm_card_visa"), authorize("pm_card_captureLostResponse")
	final := false
	amount := 300
	part, err := s.demo().CaptureCharge(t.Context(), newKey(), apiclient.CaptureInput{ChargeId: shipped, Amount: &amount, Final: &final})
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, part.Status)
	lostKey := newKey()
	pending, err := s.demo().CaptureCharge(t.Context(), lostKey, apiclient.CaptureInput{ChargeId: lost, Amount: &amount, Final: &final})
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureAttemptStatusProcessing, pending.Status)

	env := map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": s.URL + "/provider"}
	open := runCommand(t, env, "charges", "uncaptured")
	open.requireOK(t)
	require.Contains(t, open.stdout, shipped)
	require.Contains(t, open.stdout, lost)
	require.Contains(t, open.stdout, "2 open authorization(s)")
	require.Less(t, strings.Index(open.stdout, shipped), strings.Index(open.stdout, lost), "oldest first")

	stuck := runCommand(t, env, "captures", "stuck")
	stuck.requireOK(t)
	require.Contains(t, stuck.stdout, lostKey, "the capture whose answer was lost is listed")
	require.Contains(t, stuck.stdout, "1 capture(s) and void(s) PROCESSING")

	require.Eventually(t, func() bool { // its lease (1 s) ends; the operator's pass settles it
		pass := runCommand(t, env, "reconcile", "--once")
		pass.requireOK(t)
		return strings.Contains(pass.stdout, "succeeded 1")
	}, 15*time.Second, 200*time.Millisecond)
	stuck = runCommand(t, env, "captures", "stuck")
	stuck.requireOK(t)
	require.Contains(t, stuck.stdout, "0 capture(s) and void(s) PROCESSING")
	captures, err := s.demo().ListProviderCaptures(t.Context(), apiclient.ProviderCaptureFilter{})
	require.NoError(t, err)
	n := 0
	for _, c := range captures {
		if c.Status == "succeeded" {
			n++
		}
	}
	require.Equal(t, 2, n, "one capture of each charge at the provider")
}
