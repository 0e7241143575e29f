package main

import (
	"os"
	"path/filepath"
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
