package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReplaceMarked_ReplacesOnlyBetweenTheMarkers(t *testing.T) {
	t.Parallel()
	doc := "# title\n\nintro\n" + readmeBegin + "\nold table\nold chart\n" + readmeEnd + "\n\n## Next\nmore\n"

	got, err := replaceMarked(doc, "\nnew table\n\n")

	require.NoError(t, err)
	require.Equal(t, "# title\n\nintro\n"+readmeBegin+"\nnew table\n"+readmeEnd+"\n\n## Next\nmore\n", got)

	again, err := replaceMarked(got, "new table")
	require.NoError(t, err)
	require.Equal(t, got, again, "rendering the same twice changes nothing")
}

func TestReplaceMarked_BadMarkers_Errors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc string }{
		{"none", "# title\n"},
		{"no end", readmeBegin + "\n"},
		{"no begin", readmeEnd + "\n"},
		{"end first", readmeEnd + "\n" + readmeBegin + "\n"},
		{"twice", readmeBegin + readmeEnd + readmeBegin + readmeEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := replaceMarked(tc.doc, "x")
			require.Error(t, err)
		})
	}
}

func TestUpdateReadme_MissingMarkers_LeavesTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "README.md")
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
			{Name: "fresh", Figures: []Figures{{Concurrency: 8, Throughput: 400, P99ms: 57.1, PeakRSSMB: 50}, {Concurrency: 32, Throughput: 490, P99ms: 146}}},
			{Name: "pgbench-claim-finalize", Figures: []Figures{{Concurrency: 8, Throughput: 1000, P99ms: 30}, {Concurrency: 32, Throughput: 500, P99ms: 90}}},
		},
		Storm: &StormResult{Requests: 1000, Instances: 2, ProviderCharges: 1, AllFinalMs: 2240, PeakRSSMB: 69},
	}
	r.computeRatios(r.concurrencies())

	s := r.readmeSection()

	require.Contains(t, s, "AMD EPYC, 2 cores; go1.26; PostgreSQL 15; 2026-11-30 03:36 UTC")
	require.Contains(t, s, "| fresh (primary provider) / pgbench claim+finalize | 0.40 (c=8) · 0.98 (c=32) | ≥ 0.50 at c=8, 32 | missed at c=8 |")
	require.Contains(t, s, "| storm: provider charges for the one key | 1 | = 1 | met |")
	require.Contains(t, s, "| server peak RSS, MB (the most of any run) | 69 | < 150 MB | met |")
	require.Contains(t, s, "| fresh | 400 /s, p99 57.1 ms | 490 /s, p99 146.0 ms |")
	require.Contains(t, s, "](bench/results/chart.png)")
}
