package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadTxLogs_EveryThreadsFile_SkipsFailed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Two threads' logs, as pgbench -j 2 --log writes them; a failed
	// transaction has no latency.
	for name, text := range map[string]string{
		"tx.4242":   "0 0 1000 0 1700000000 1\n0 1 3000 0 1700000000 2\n",
		"tx.4242.1": "1 0 2000 0 1700000000 3\n1 1 failed 0 1700000000 4\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}

	lat, err := readTxLogs(filepath.Join(dir, "tx"))
	require.NoError(t, err)
	require.ElementsMatch(t, []float64{1, 3, 2}, lat)
	require.Equal(t, 2.0, percentile(lat, 0.50))
	require.Equal(t, 3.0, percentile(lat, 0.99))
}

func TestReadTxLogs_NoLogs_Errors(t *testing.T) {
	t.Parallel()
	_, err := readTxLogs(filepath.Join(t.TempDir(), "tx"))
	require.Error(t, err)
}

func TestPercentile_NearestRank(t *testing.T) {
	t.Parallel()
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100 … 1, unsorted
	}
	for _, tc := range []struct{ q, want float64 }{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}} {
		require.Equal(t, tc.want, percentile(xs, tc.q), "q=%v", tc.q)
	}
	require.Zero(t, percentile(nil, 0.5))
}

func TestFold_OwnSQL_OutcomeOnTheAttempt_NoChargeRowNoQueueEntry(t *testing.T) {
	t.Parallel()
	require.Contains(t, claimFinalizeScript, "INSERT INTO charges")
	require.Contains(t, claimFinalizeScript, "INSERT INTO charge_events_unsent")
	require.NotContains(t, foldedScript, "INSERT INTO charges")
	require.NotContains(t, foldedScript, "charge_events_unsent")
	require.Contains(t, foldedScript, "provider_charge_id = 'ch_' || gen_random_uuid()")
	// The claim and the outbox event are the own SQL's, word for word.
	claim := claimFinalizeScript[:strings.Index(claimFinalizeScript, "WITH done AS")]
	require.True(t, strings.HasPrefix(foldedScript, claim))
	require.Contains(t, foldedScript, "INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, charge_id, body, request_id, occurred_at)")
	require.Panics(t, func() { fold("SELECT 1") })
}

func TestMergeSlices_MeanThroughput_SummedCounts_PercentilesOfAll(t *testing.T) {
	t.Parallel()
	parts := []Figures{
		{Concurrency: 8, Throughput: 1000, MeanMs: 2, Errors: 1, Requests: 3000},
		{Concurrency: 8, Throughput: 2000, MeanMs: 4, Errors: 0, Requests: 6000},
	}
	lat := []float64{5, 1, 4, 2, 3}
	f := mergeSlices(parts, lat)
	require.Equal(t, Figures{Concurrency: 8, Throughput: 1500, MeanMs: 3, Errors: 1, Requests: 9000, P50ms: 3, P99ms: 5}, f)
}
