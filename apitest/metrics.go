package apitest

import (
	"chargeonce/metrics/metricstest"
	"testing"

	"github.com/stretchr/testify/require"
)

type MetricDelta struct {
	Name   string
	Labels []string
	Want   float64
}

// RequireDeltas checks how much each metric moved between two scrapes.
func RequireDeltas(t *testing.T, before, after metricstest.Samples, deltas []MetricDelta) {
	t.Helper()
	for _, d := range deltas {
		got := after.Value(d.Name, d.Labels...) - before.Value(d.Name, d.Labels...)
		require.Equal(t, d.Want, got, "%s%v moved by %v, want %v", d.Name, d.Labels, got, d.Want)
	}
}
