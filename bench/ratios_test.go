package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTargetCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		t    target
		conc int
		v    float64
		want *bool
	}{
		{"at least, met", target{op: ">=", bound: 0.5}, 8, 0.5, new(true)},
		{"at least, missed", target{op: ">=", bound: 0.5}, 8, 0.49, new(false)},
		{"at most", target{op: "<=", bound: 2}, 1, 2.1, new(false)},
		{"below", target{op: "<", bound: 150}, 0, 149, new(true)},
		{"equal", target{op: "==", bound: 1}, 200, 2, new(false)},
		{"not at this concurrency", target{op: ">=", bound: 0.5, at: []int{8, 32}}, 64, 0.1, nil},
		{"no numeric target", scalingTarget, 8, 0.3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.t.check(tc.conc, tc.v))
		})
	}
}

func TestComputeRatios_SlowScaling_OnlyBelowTheCeiling(t *testing.T) {
	t.Parallel()
	figs := func(tp ...float64) []Figures {
		var fs []Figures
		for i, c := range []int{1, 8, 32} {
			fs = append(fs, Figures{Concurrency: c, Throughput: tp[i], PeakRSSMB: 40})
		}
		return fs
	}
	r := Results{
		Runs: []Run{
			{Name: "fresh-cardsim", Figures: figs(100, 400, 500)},
			// The ideal at c=32, 32 / 50 ms = 640/s, is above the ceiling.
			{Name: "fresh-50ms", Figures: figs(19, 76, 300)},
		},
		Storm: &StormResult{Requests: 200, ProviderCharges: 1, Errors: 0, PeakRSSMB: 160},
	}
	r.computeRatios([]int{1, 8, 32})

	require.Equal(t, []string{
		"fresh-50ms scaling: throughput / (c × throughput at c=1)@8",
		"storm: provider charges for the one key@200",
		"storm: errors@200",
		"server peak RSS, MB (the most of any run)@0",
	}, ratioNames(r.Ratios))
	require.InDelta(t, 0.5, r.Ratios[0].Value, 1e-9)
	require.Nil(t, r.Ratios[0].Met)
	require.Equal(t, "missed", r.Ratios[3].metText(), "the storm's servers count for the peak RSS")
}

func TestComputeRatios_ScaleOut_ThroughputOverOneInstance(t *testing.T) {
	t.Parallel()
	so := func(name string, n int, tp ...float64) Run {
		run := Run{Name: name, Instances: n}
		for i, c := range []int{32, 64}[:len(tp)] {
			run.Figures = append(run.Figures, Figures{Concurrency: c, Throughput: tp[i], PeakRSSMB: float64(40 + n)})
		}
		return run
	}
	r := Results{ScaleOut: []Run{
		so("scaleout-fresh", 1, 700, 800),
		so("scaleout-fresh", 2, 770, 600),
		so("scaleout-fresh", 3, 1050),
		// No run on one instance: nothing to divide by.
		so("scaleout-replay", 2, 7000),
	}}
	r.computeRatios([]int{32, 64})

	vs := func(name string, n, conc int) float64 { return r.scaleOut(name, n).at(conc).VsOneInstance }
	require.InDelta(t, 1.0, vs("scaleout-fresh", 1, 32), 1e-9)
	require.InDelta(t, 1.1, vs("scaleout-fresh", 2, 32), 1e-9)
	require.InDelta(t, 0.75, vs("scaleout-fresh", 2, 64), 1e-9, "fewer requests than on one instance: below 1")
	require.InDelta(t, 1.5, vs("scaleout-fresh", 3, 32), 1e-9)
	require.Zero(t, vs("scaleout-replay", 2, 32))
	require.Equal(t, []string{"server peak RSS, MB (the most of any run)@0"}, ratioNames(r.Ratios),
		"the scale-out ratios stay with their figures")
	require.Equal(t, 43.0, r.Ratios[0].Value, "the scale-out instances count for the peak RSS")
}

func ratioNames(ratios []Ratio) []string {
	var names []string
	for _, q := range ratios {
		names = append(names, fmt.Sprintf("%s@%d", q.Name, q.Concurrency))
	}
	return names
}

func TestInFlightRatios_AgainstTheDelayOrTheFreshCeiling(t *testing.T) {
	t.Parallel()
	r := Results{Runs: []Run{
		{Name: "fresh", Figures: []Figures{{Concurrency: 32, Throughput: 1200, P99ms: 40}}},
		{Name: "fresh-300ms", Figures: []Figures{
			{Concurrency: 256, Throughput: 800, P99ms: 400, PeakRSSMB: 120},
			{Concurrency: 1024, Throughput: 900, P99ms: 700, Errors: 3, PeakRSSMB: 210},
		}},
	}}
	r.computeRatios(r.concurrencies())
	got := map[string]string{}
	for _, q := range r.Ratios {
		got[fmt.Sprintf("%s c=%d", q.Name, q.Concurrency)] = q.valueText() + " " + q.metText()
	}
	// c=256: 256 / 300 ms = 853/s is below the fresh ceiling of 1200/s.
	require.Equal(t, "0.94 met", got["fresh-300ms: throughput / min(c / 300 ms, fresh at c=32) c=256"])
	// c=1024: 3413/s would be above it, so 1200/s is what it could do.
	require.Equal(t, "0.75 missed", got["fresh-300ms: throughput / min(c / 300 ms, fresh at c=32) c=1024"])
	require.Equal(t, "0.62 met", got["fresh-300ms: p99 / (2 × 300 ms + fresh p99 at c=32) c=256"])
	require.Equal(t, "1.09 missed", got["fresh-300ms: p99 / (2 × 300 ms + fresh p99 at c=32) c=1024"])
	require.Equal(t, "3 missed", got["fresh-300ms: errors c=1024"])
	require.Equal(t, "210 missed", got["fresh-300ms: server peak RSS, MB c=1024"])
	require.Equal(t, "0 met", got["fresh-300ms: errors c=256"])
	for _, q := range r.Ratios {
		require.NotEqual(t, "server peak RSS, MB (the most of any run)", q.Name, "the in-flight run's RSS has its own target")
	}
}

func TestComputeRatios_UncachedBound_OneRoundTripOnTopOfACachedReplay(t *testing.T) {
	t.Parallel()
	at8 := func(tp float64) []Figures { return []Figures{{Concurrency: 8, Throughput: tp}} }
	r := Results{Runs: []Run{
		// A request costs the inverse of its throughput: trivial 50 µs, a
		// cached replay 80 µs, a round trip 45 − 20 = 25 µs.
		{Name: "trivial", Figures: at8(20_000)},
		{Name: "replay", Figures: at8(12_500)},
		{Name: "probe", Figures: at8(50_000)},
		{Name: "probe-db", Figures: at8(1e6 / 45)},
	}}
	r.computeRatios([]int{8})
	var bound *Ratio
	for i := range r.Ratios {
		if r.Ratios[i].Name == "replay without the result cache / trivial query throughput: the most a cached replay's work and one empty round trip leave" {
			bound = &r.Ratios[i]
		}
	}
	require.NotNil(t, bound, "ratios: %v", ratioNames(r.Ratios))
	require.InDelta(t, 50.0/105, bound.Value, 1e-9)
	require.Nil(t, bound.Met)

	// Without the probes there is no bound to give.
	r.Runs = r.Runs[:2]
	r.computeRatios([]int{8})
	require.NotContains(t, ratioNames(r.Ratios), bound.Name+"@8")
}
