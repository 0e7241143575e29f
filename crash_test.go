package main

import (
	"bytes"
	"encoding/json"
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
	body, err := json.Marshal(map[string]any{"query": chargeCardMutation, "variables": map[string]any{"key": key, "input": input}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer demo-key")
	resp, err := s.client.Do(req)
	if err != nil {
		return gqlResponse{}, err
	}
	defer resp.Body.Close()
	var out gqlResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return gqlResponse{}, err
	}
	return out, nil
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
