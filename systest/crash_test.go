package systest

import (
	"maps"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/provider/providertest"
)

// crashCase is a server killed at one dangerous point of a charge, the
// card it charges, and the status its attempt must end in.
type crashCase struct {
	crashAt       string
	paymentMethod string
	wantStatus    string
}

// eachCrash runs crash for each case, in parallel, on a database of its
// own.
func eachCrash(t *testing.T, cases []crashCase, crash func(t *testing.T, tt crashCase, dbURL string)) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.crashAt+"/"+tt.paymentMethod, func(t *testing.T) {
			t.Parallel()
			crash(t, tt, dbtest.NewDatabase(t))
		})
	}
}

// withCrash is env with the fault that kills chargeonce (SIGKILL) at a
// dangerous point.
func withCrash(env map[string]string, at string) map[string]string {
	vars := maps.Clone(env)
	vars["CHARGEONCE_CRASH_AT"] = at
	return vars
}

// chargeUntilCrash starts a server with env that dies at tt.crashAt,
// charges tt's card with a new key through it, and requires that the
// server died of SIGKILL before it answered. It returns the key.
func chargeUntilCrash(t *testing.T, env map[string]string, tt crashCase) string {
	t.Helper()
	doomed := startServer(t, withCrash(env, tt.crashAt))
	key := newKey()
	_, err := doomed.demo().ChargeCard(t.Context(), key, withPaymentMethod(tt.paymentMethod))
	requireConnectionDied(t, err)
	requireKilled(t, doomed.Process, 10*time.Second, "the server died of SIGKILL at %s", tt.crashAt)
	return key
}

func TestCrash_KilledAtEachDangerousPoint_NeverChargesTwice(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	eachCrash(t, []crashCase{
		{"after-claim", "pm_card_visa", "SUCCEEDED"},
		{"after-provider", "pm_card_visa", "SUCCEEDED"},
		{"after-finalize", "pm_card_visa", "SUCCEEDED"},
		{"after-claim", "pm_card_chargeDeclined", "FAILED"},
		{"after-provider", "pm_card_chargeDeclined", "FAILED"},
	}, func(t *testing.T, tt crashCase, dbURL string) {
		// The provider runs in a process of its own, as a real one would:
		// the crash takes down chargeonce, not the provider.
		provider := startServer(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h"})
		providerURL := provider.URL + "/provider"
		key := chargeUntilCrash(t, map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": providerURL}, tt)

		// A fresh instance (a restart, or another replica) settles the attempt.
		survivor := startServer(t, map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": providerURL})
		final := survivor.finalStatus(t, key, 15*time.Second) // lease 2s + interval 200ms, with room
		require.Equal(t, tt.wantStatus, final.Status)

		var succeeded []apiclient.ProviderCharge
		for _, c := range provider.providerCharges(t, key) {
			if c.Status == "succeeded" {
				succeeded = append(succeeded, c)
			}
		}
		if tt.wantStatus == "SUCCEEDED" {
			require.Equal(t, 1, len(succeeded), "exactly one charge at the provider")
			require.Equal(t, succeeded[0].ID, final.Charge.ProviderChargeId, "the stored result matches the provider")
		} else {
			require.Empty(t, succeeded, "a declined card is never charged")
			require.Equal(t, "card_declined", final.Failure.Code)
		}

		replay := survivor.chargeCard(t, apiclient.DemoAPIKey, key, withPaymentMethod(tt.paymentMethod))
		require.Equal(t, tt.wantStatus, replay.Status)
		require.True(t, replay.Replayed, "the retry is a replay of the final result")
		if final.Charge != nil {
			require.Equal(t, final.Charge.Id, replay.Charge.Id)
		}
	})
}

func TestShutdown_SIGTERM_FinishesInFlightCharges(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL, "SIM_SLOW_DELAY": "700ms"})
	key := newKey()
	type answer struct {
		r   *apiclient.ChargeResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		r, err := s.demo().ChargeCard(t.Context(), key, withPaymentMethod("pm_card_slow"))
		answered <- answer{r, err}
	}()
	// Wait until the charge is in flight, then deploy: SIGTERM.
	pool := dbtest.Open(t, dbURL)
	waitRows(t, pool, 1, 10*time.Second, "SELECT count(*) FROM charge_attempts")
	require.NoError(t, s.Signal(syscall.SIGTERM))

	a := <-answered
	require.NoError(t, a.err, "the in-flight request gets its answer")
	require.Equal(t, "SUCCEEDED", a.r.Status)
	state, err := s.Wait(30 * time.Second)
	require.NoError(t, err)
	require.True(t, state.Success(), "a clean exit: %v", state)
	require.Equal(t, "SUCCEEDED", attemptStatus(t, pool, key), "no PROCESSING record is left behind")
}

func TestOperatorCommands_StuckAndReconcileOnce(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// A server whose own reconciler stays out of the way, so the operator's
	// pass does the work; the commands reach its simulator over the network.
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h", "PROCESSING_LEASE": "1s"})
	key := newKey()
	require.Equal(t, "PROCESSING", s.chargeCard(t, apiclient.DemoAPIKey, key, withPaymentMethod("pm_card_lostResponse")).Status)

	env := map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": s.URL + "/provider"}
	stuck := runCommand(t, env, "charges", "stuck")
	stuck.requireOK(t)
	require.Contains(t, stuck.stdout, key, "the stuck attempt is listed")
	require.Contains(t, stuck.stdout, "1 stuck attempt(s)")

	pass := runCommand(t, env, "reconcile", "--once")
	pass.requireOK(t)
	require.Contains(t, pass.stdout, "taken 1, succeeded 1, failed 0, still processing 0")
	require.Equal(t, "SUCCEEDED", s.chargeStatus(t, key).Status)

	stuck = runCommand(t, env, "charges", "stuck")
	stuck.requireOK(t)
	require.Contains(t, stuck.stdout, "0 stuck attempt(s)")
	require.Equal(t, 1, len(s.providerCharges(t, key)))
}

// An instance killed (SIGKILL) while an attempt waits for the shopper to
// authenticate: nothing of the wait lived in it. After a restart the
// attempt still ends as the provider says: SUCCEEDED with one charge when
// the shopper completed meanwhile, FAILED authentication_abandoned with
// the payment cancelled when nobody did within the window.
func TestCrash_KilledWhileTheShopperAuthenticates_StillEndsRight(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	for _, tt := range []struct {
		name       string
		complete   bool
		env        map[string]string // the restarted instance's
		wantStatus string
		wantSim    string
	}{
		{"completed meanwhile", true, nil, "SUCCEEDED", "succeeded"},
		{"abandoned", false, map[string]string{"AUTHENTICATION_WINDOW": "2s", "AUTHENTICATION_CHECK_INTERVAL": "200ms"}, "FAILED", "canceled"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dbURL := dbtest.NewDatabase(t)
			provider := startServer(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h"})
			env := map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": provider.URL + "/provider"}
			doomed := startServer(t, mergeEnv(env, tt.env)) // its await schedules the next look by tt.env too
			key := newKey()
			in := withPaymentMethod("pm_card_authenticationRequired")
			back := "https://shop.example/return"
			in.ReturnUrl = &back
			waiting := doomed.chargeCard(t, apiclient.DemoAPIKey, key, in)
			require.Equal(t, "PROCESSING", waiting.Status)
			require.NotNil(t, waiting.NextAction)
			require.NoError(t, doomed.Signal(syscall.SIGKILL))
			requireKilled(t, doomed.Process, 10*time.Second, "killed mid-authentication")

			if tt.complete {
				providertest.PressChallenge(t, provider.HTTP, waiting.NextAction.Url, "complete")
			}

			survivor := startServer(t, mergeEnv(env, tt.env))
			final := survivor.finalStatus(t, key, 20*time.Second)
			require.Equal(t, tt.wantStatus, final.Status)
			charges := provider.providerCharges(t, key)
			require.Len(t, charges, 1, "one payment at the provider, never sent again")
			require.Equal(t, tt.wantSim, charges[0].Status)
			if tt.complete {
				require.Equal(t, charges[0].ID, final.Charge.ProviderChargeId)
			} else {
				require.Equal(t, "authentication_abandoned", final.Failure.Code)
			}
			replay := survivor.chargeCard(t, apiclient.DemoAPIKey, key, in)
			require.Equal(t, tt.wantStatus, replay.Status)
			require.True(t, replay.Replayed)
		})
	}
}

// mergeEnv is base with over on top.
func mergeEnv(base, over map[string]string) map[string]string {
	env := maps.Clone(base)
	maps.Copy(env, over)
	return env
}
