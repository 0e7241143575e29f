package main

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// postCharge sends chargeCard and returns the transport error, if any,
// instead of failing: the server may die under it.
func (s *testServer) postCharge(t *testing.T, key string, input map[string]any) (gqlResponse, error) {
	t.Helper()
	return s.tryDo(t, bearer("demo-key"), chargeCardMutation, map[string]any{"key": key, "input": input})
}

// finalStatus polls chargeStatus until the attempt leaves PROCESSING.
func (s *testServer) finalStatus(t *testing.T, key string, within time.Duration) *payload {
	t.Helper()
	var p *payload
	require.Eventually(t, func() bool {
		p = s.chargeStatus(t, "demo-key", key).Data.ChargeStatus
		return p != nil && p.Status != "PROCESSING"
	}, within, 50*time.Millisecond, "attempt %s still not final", key)
	return p
}

func TestCrash_KilledAtEachDangerousPoint_NeverChargesTwice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		crashAt       string
		paymentMethod string
		wantStatus    string
	}{
		{"after-claim", "pm_card_visa", "SUCCEEDED"},
		{"after-provider", "pm_card_visa", "SUCCEEDED"},
		{"after-finalize", "pm_card_visa", "SUCCEEDED"},
		{"after-claim", "pm_card_chargeDeclined", "FAILED"},
		{"after-provider", "pm_card_chargeDeclined", "FAILED"},
	}
	for _, tt := range tests {
		t.Run(tt.crashAt+"/"+tt.paymentMethod, func(t *testing.T) {
			t.Parallel()
			dbURL := dbtest.NewDatabase(t)
			// The provider runs in a process of its own, as a real one would:
			// the crash takes down chargeonce, not the provider.
			provider := startProcess(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h"})
			providerURL := provider.URL + "/provider"

			doomed := startProcess(t, map[string]string{
				"DATABASE_URL": dbURL, "PROVIDER_URL": providerURL, "CHARGEONCE_CRASH_AT": tt.crashAt,
			})
			key := newKey()
			_, err := doomed.postCharge(t, key, withPaymentMethod(tt.paymentMethod))
			require.Error(t, err, "the client sees the connection die, not an answer")
			require.True(t, killedBySIGKILL(doomed.wait(t, 10*time.Second)), "the server died of SIGKILL at %s", tt.crashAt)

			// A fresh instance (a restart, or another replica) settles the attempt.
			survivor := startProcess(t, map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": providerURL})
			final := survivor.finalStatus(t, key, 15*time.Second) // lease 2s + interval 200ms, with room
			require.Equal(t, tt.wantStatus, final.Status)

			charges := provider.providerCharges(t, "demo", key)
			var succeeded []providerCharge
			for _, c := range charges {
				if c.Status == "succeeded" {
					succeeded = append(succeeded, c)
				}
			}
			if tt.wantStatus == "SUCCEEDED" {
				require.Equal(t, 1, len(succeeded), "exactly one charge at the provider")
				require.Equal(t, succeeded[0].ID, final.Charge.ProviderChargeID, "the stored result matches the provider")
			} else {
				require.Empty(t, succeeded, "a declined card is never charged")
				require.Equal(t, "card_declined", final.Failure.Code)
			}

			replay := survivor.chargeCard(t, "demo-key", key, withPaymentMethod(tt.paymentMethod)).Data.ChargeCard
			require.Equal(t, tt.wantStatus, replay.Status)
			require.True(t, replay.Replayed, "the retry is a replay of the final result")
			if final.Charge != nil {
				require.Equal(t, final.Charge.ID, replay.Charge.ID)
			}
		})
	}
}

func TestShutdown_SIGTERM_FinishesInFlightCharges(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startProcess(t, map[string]string{"DATABASE_URL": dbURL, "SIM_SLOW_DELAY": "700ms"})
	key := newKey()
	answer := make(chan gqlResponse, 1)
	errs := make(chan error, 1)
	go func() {
		r, err := s.postCharge(t, key, withPaymentMethod("pm_card_slow"))
		answer <- r
		errs <- err
	}()
	// Wait until the charge is in flight, then deploy: SIGTERM.
	pool := openPool(t, dbURL)
	require.Eventually(t, func() bool {
		var n int
		_ = pool.QueryRow(t.Context(), "SELECT count(*) FROM charge_attempts").Scan(&n)
		return n == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))

	require.NoError(t, <-errs, "the in-flight request gets its answer")
	r := <-answer
	require.Empty(t, r.Errors)
	require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status)
	state := s.wait(t, 30*time.Second)
	require.True(t, state.Success(), "a clean exit: %v\n%s", state, s.logs.String())
	require.Equal(t, "SUCCEEDED", attemptStatus(t, pool, key), "no PROCESSING record is left behind")
}

func TestChargeCard_ResponseLostOnTheWire_RetryIsAReplay(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, map[string]string{"SIM_SLOW_DELAY": "500ms"})
	key := newKey()
	// The client gives up once its charge is under way and before the answer
	// arrives, as when a mobile connection drops; the server is fine and
	// finishes the charge.
	ctx, hangUp := context.WithCancel(context.Background())
	lost := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql",
			jsonBody(t, map[string]any{"query": chargeCardMutation, "variables": map[string]any{"key": key, "input": withPaymentMethod("pm_card_slow")}}))
		if err == nil {
			req.Header = jsonHeaders("Authorization", "Bearer demo-key")
			var resp *http.Response
			if resp, err = s.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		lost <- err
	}()
	require.Eventually(t, func() bool {
		p := s.chargeStatus(t, "demo-key", key).Data.ChargeStatus
		return p != nil && p.Status == "PROCESSING"
	}, 10*time.Second, 10*time.Millisecond, "the charge is under way")
	hangUp()
	require.Error(t, <-lost, "the client never got its answer")

	final := s.finalStatus(t, key, 10*time.Second)
	require.Equal(t, "SUCCEEDED", final.Status)
	retry := s.chargeCard(t, "demo-key", key, withPaymentMethod("pm_card_slow")).Data.ChargeCard
	require.True(t, retry.Replayed)
	require.Equal(t, final.Charge.ID, retry.Charge.ID)
	require.Equal(t, 1, len(s.providerCharges(t, "demo", key)))
}

func TestReconciler_SettlesUnknownOutcomesThroughTheServer(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, map[string]string{
		"PROCESSING_LEASE": "2s", "RECONCILE_INTERVAL": "200ms", "REDRIVE_WINDOW": "1s",
	})
	lost, failing := newKey(), newKey()
	for key, pm := range map[string]string{lost: "pm_card_lostResponse", failing: "pm_card_providerError"} {
		r := s.chargeCard(t, "demo-key", key, withPaymentMethod(pm)).Data.ChargeCard
		require.Equal(t, "PROCESSING", r.Status, pm)
		require.Positive(t, *r.RetryAfterMs)
	}

	charged := s.finalStatus(t, lost, 10*time.Second)
	require.Equal(t, "SUCCEEDED", charged.Status, "the provider charged; the reconciler learns it by our key")
	ledger := s.providerCharges(t, "demo", lost)
	require.Equal(t, 1, len(ledger))
	require.Equal(t, ledger[0].ID, charged.Charge.ProviderChargeID)

	failed := s.finalStatus(t, failing, 10*time.Second)
	require.Equal(t, "FAILED", failed.Status, "never charged, and the redrive window has passed")
	require.Equal(t, "provider_unavailable", failed.Failure.Code)
	require.Empty(t, s.providerCharges(t, "demo", failing))
}

func TestOperatorCommands_StuckAndReconcileOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// A server whose own reconciler stays out of the way, so the operator's pass does the work.
	// Listening for real: the commands reach its simulator over the network.
	s := startListening(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h", "PROCESSING_LEASE": "1s"})
	key := newKey()
	require.Equal(t, "PROCESSING", s.chargeCard(t, "demo-key", key, withPaymentMethod("pm_card_lostResponse")).Data.ChargeCard.Status)

	env := map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": s.URL + "/provider"}
	getenv := func(k string) string { return env[k] }
	var out syncBuffer
	require.NoError(t, run(t.Context(), []string{"chargeonce", "charges", "stuck"}, getenv, &out, &out))
	require.Contains(t, out.String(), key, "the stuck attempt is listed")
	require.Contains(t, out.String(), "1 stuck attempt(s)")

	out = syncBuffer{}
	require.NoError(t, run(t.Context(), []string{"chargeonce", "reconcile", "--once"}, getenv, &out, &out))
	require.Contains(t, out.String(), "taken 1, succeeded 1, failed 0, still processing 0")
	require.Equal(t, "SUCCEEDED", s.chargeStatus(t, "demo-key", key).Data.ChargeStatus.Status)

	out = syncBuffer{}
	require.NoError(t, run(t.Context(), []string{"chargeonce", "charges", "stuck"}, getenv, &out, &out))
	require.Contains(t, out.String(), "0 stuck attempt(s)")
	require.Equal(t, 1, len(s.providerCharges(t, "demo", key)))
}
