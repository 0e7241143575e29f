package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUpdateReadme_MissingMarkers_LeavesTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "performance.md")
	require.NoError(t, os.WriteFile(path, []byte("# title\n"), 0o644))

	require.Error(t, updateReadme(path, &Results{}))

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "# title\n", string(b))
}

func TestReadmeSection_MachineTargetsRunsAndChart(t *testing.T) {
	t.Parallel()
	r := Results{
		Duration: "10s",
		Machine:  Machine{CPU: "AMD EPYC", Cores: 2, Go: "go1.26", Postgres: "PostgreSQL 15", Date: "2026-11-30 03:36 UTC"},
		Runs: []Run{
			{Name: "fresh", Figures: []Figures{{Concurrency: 8, Throughput: 400, P99ms: 57.1, PeakRSSMB: 50, WALBytesPerRequest: 1900}, {Concurrency: 32, Throughput: 490, P99ms: 146, WALBytesPerRequest: 2300}}},
			{Name: "pgbench-minimal", Figures: []Figures{{Concurrency: 8, Throughput: 1000, P99ms: 20}, {Concurrency: 32, Throughput: 1000, P99ms: 60}}},
			{Name: "pgbench-two-commit", Figures: []Figures{{Concurrency: 8, Throughput: 1000, P99ms: 30}, {Concurrency: 32, Throughput: 500, P99ms: 90}}},
			{Name: "pgbench-claim-finalize", Figures: []Figures{{Concurrency: 8, Throughput: 800, P99ms: 30}, {Concurrency: 32, Throughput: 700, P99ms: 90}}},
		},
		Storm: &StormResult{Requests: 1000, Instances: 2, ProviderCharges: 1, AllFinalMs: 2240, PeakRSSMB: 69},
	}
	r.computeRatios(r.concurrencies())

	s := r.readmeSection()

	require.Contains(t, s, "AMD EPYC, 2 cores; go1.26; PostgreSQL 15; 2026-11-30 03:36 UTC")
	require.Contains(t, s, "| fresh (primary provider) / pgbench minimal exactly-once ceiling | 0.40 (c=8) · 0.49 (c=32) | ≥ 0.50 at c=8, 32 | missed |")
	require.Contains(t, s, "| pgbench claim+finalize (chargeonce's own SQL) / pgbench minimal exactly-once ceiling | 0.80 (c=8) · 0.70 (c=32) | ≥ 0.70 at c=8, 32 | met |")
	require.Contains(t, s, "| fresh: WAL bytes per charge | 1900 (c=8) · 2300 (c=32) | ≤ 2048 B at c=8, 32 | missed at c=32 |")
	require.Contains(t, s, "| fresh (primary provider) / pgbench two-commit limit | 0.40 (c=8) · 0.98 (c=32) | no numeric target | – |")
	require.Contains(t, s, "| fresh (primary provider) / pgbench claim+finalize (chargeonce's own SQL) | 0.50 (c=8) · 0.70 (c=32) | no numeric target | – |")
	require.Contains(t, s, "| storm: provider charges for the one key | 1 | = 1 | met |")
	require.Contains(t, s, "| server peak RSS, MB (the most of any run) | 69 | < 150 MB | met |")
	require.Contains(t, s, "| fresh | 400 /s, p99 57.1 ms | 490 /s, p99 146.0 ms |")
	require.Contains(t, s, "](../bench/results/chart.png)")
}

func TestScaleOut_ReadmeLinesAndResultsTable(t *testing.T) {
	t.Parallel()
	r := Results{
		Machine: Machine{Cores: 2},
		ScaleOut: []Run{
			{Name: "scaleout-fresh", Instances: 1, What: "fresh keys in turn", Figures: []Figures{{Concurrency: 32, Throughput: 700, P50ms: 40, P99ms: 81.45, PeakRSSMB: 80, CommitsPerRequest: 2.03}}},
			{Name: "scaleout-fresh", Instances: 2, What: "fresh keys in turn", Figures: []Figures{{Concurrency: 32, Throughput: 770, P50ms: 38, P99ms: 90, PeakRSSMB: 70}}},
			{Name: "scaleout-replay", Instances: 1, What: "replays in turn", Figures: []Figures{{Concurrency: 32, Throughput: 7000, P50ms: 2.8, P99ms: 15.08}}},
		},
	}
	r.computeRatios(r.concurrencies())

	require.Equal(t, []string{
		"scaleout-fresh, c=32, by instances: 1: 700 /s, p99 81.5 ms · 2: 770 /s, p99 90.0 ms (× 1.10)",
		"scaleout-replay, c=32, by instances: 1: 7000 /s, p99 15.1 ms",
	}, r.scaleOutSummary())
	require.Contains(t, r.readmeSection(), "\n- scaleout-fresh, c=32, by instances: 1: 700 /s")

	md := r.markdown()
	require.Contains(t, md, "## Scale-out (instances on one machine)")
	require.Contains(t, md, "| scaleout-fresh | 1 | 32 | 700 | 1.00 | 40.00 | 81.45 | 0 | 80 | 2.03 |\n")
	require.Contains(t, md, "| scaleout-fresh | 2 | 32 | 770 | 1.10 | 38.00 | 90.00 | 0 | 70 | – |\n")
	require.Contains(t, md, "- **scaleout-fresh**: fresh keys in turn\n- **scaleout-replay**: replays in turn\n")
	require.NotContains(t, md, "| scaleout-fresh | 32 |", "the scale-out runs keep out of the table by concurrency")
}

func TestWrite_OnlyScaleOut_NoChart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stale := filepath.Join(dir, "chart.png")
	require.NoError(t, os.WriteFile(stale, []byte("an earlier run's chart"), 0o644))
	r := Results{ScaleOut: []Run{{Name: "scaleout-fresh", Instances: 1, Figures: []Figures{{Concurrency: 32, Throughput: 700}}}}}

	require.NoError(t, r.write(dir))

	require.FileExists(t, filepath.Join(dir, "results.md"))
	require.FileExists(t, filepath.Join(dir, "results.json"))
	require.NoFileExists(t, stale, "no run by concurrency: no chart, and not an earlier one")
}

func TestEventLatency_ResultsTableAndReadmeLine(t *testing.T) {
	t.Parallel()
	r := Results{
		Machine: Machine{Cores: 2},
		Latency: []EventLatency{
			{Load: "fresh charges, PROVIDER=instant with INSTANT_DELAY=300ms", Concurrency: 32, Throughput: 99.4, Errors: 0,
				Stream: Percentile{Count: 1523, P50ms: 28.77, P99ms: 108.34}, Subscriber: Percentile{Count: 484, P50ms: 9.57, P99ms: 53.65}},
			{Load: "fresh charges, PROVIDER=instant with INSTANT_DELAY=300ms", Concurrency: 256, Throughput: 651, Errors: 2,
				Stream: Percentile{Count: 7122, P50ms: 146.19, P99ms: 402.68}, Subscriber: Percentile{Count: 382, P50ms: 68.53, P99ms: 165.25}},
		},
	}

	md := r.markdown()
	require.Contains(t, md, "**Event latency**, under fresh charges, PROVIDER=instant with INSTANT_DELAY=300ms, from the time")
	require.Contains(t, md, "| 32 | 99 | 0 | 1523 | 28.77 | 108.34 | 484 | 9.57 | 53.65 |")
	require.Contains(t, md, "| 256 | 651 | 2 | 7122 | 146.19 | 402.68 | 382 | 68.53 | 165.25 |")

	s := r.readmeSection()
	require.Contains(t, s, "- c=32 (99 charges/s): to the stream p50 28.8 ms, p99 108.3 ms; to a live-status subscriber p50 9.57 ms, p99 53.6 ms\n")
	require.Contains(t, s, "- c=256 (651 charges/s): to the stream p50 146.2 ms")
}

func TestPercentiles_OfSamples(t *testing.T) {
	t.Parallel()
	xs := make([]float64, 0, 100)
	for i := 100; i >= 1; i-- {
		xs = append(xs, float64(i))
	}
	require.Equal(t, Percentile{Count: 100, P50ms: 50, P99ms: 99}, percentiles(xs))
	require.Equal(t, Percentile{}, percentiles(nil))
}
