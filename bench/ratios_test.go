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

	var names []string
	for _, q := range r.Ratios {
		names = append(names, fmt.Sprintf("%s@%d", q.Name, q.Concurrency))
	}
	require.Equal(t, []string{
		"fresh-50ms scaling: throughput / (c × throughput at c=1)@8",
		"storm: provider charges for the one key@200",
		"storm: errors@200",
		"server peak RSS, MB (the most of any run)@0",
	}, names)
	require.InDelta(t, 0.5, r.Ratios[0].Value, 1e-9)
	require.Nil(t, r.Ratios[0].Met)
	require.Equal(t, "missed", r.Ratios[3].metText(), "the storm's servers count for the peak RSS")
}
