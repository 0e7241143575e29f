package chaos

import (
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/internal/apiclient"
)

// TestCheckStored_FindsWhatWasLostOrDoubled feeds the checker what a broken
// cluster could leave behind, so that a chaos run that finds nothing means
// something.
func TestCheckStored_FindsWhatWasLostOrDoubled(t *testing.T) {
	t.Parallel()
	stored := func(status, id, providerID string) *apiclient.ChargeResult {
		p := &apiclient.ChargeResult{Status: status}
		if id != "" {
			p.Charge = &apiclient.Charge{Id: id, ProviderChargeId: providerID}
		}
		return p
	}
	ok := []apiclient.ProviderCharge{{ID: "ch_1", Status: "succeeded"}}
	for _, tc := range []struct {
		name          string
		told          answer
		now           *apiclient.ChargeResult
		charges       []apiclient.ProviderCharge
		lost, doubled int
		problems      int
	}{
		{"as told", answer{status: "SUCCEEDED", chargeID: "c1"}, stored("SUCCEEDED", "c1", "ch_1"), ok, 0, 0, 0},
		{"a declined card, as told", answer{status: "FAILED"}, stored("FAILED", "", ""), []apiclient.ProviderCharge{{ID: "ch_2", Status: "failed"}}, 0, 0, 0},
		{"unknown after a failover", answer{status: "SUCCEEDED", chargeID: "c1"}, nil, ok, 1, 0, 1},
		{"another charge now", answer{status: "SUCCEEDED", chargeID: "c1"}, stored("SUCCEEDED", "c2", "ch_1"), ok, 1, 0, 1},
		{"failed now", answer{status: "SUCCEEDED", chargeID: "c1"}, stored("FAILED", "", ""), ok, 1, 0, 1},
		{"charged twice", answer{status: "SUCCEEDED", chargeID: "c1"}, stored("SUCCEEDED", "c1", "ch_1"),
			[]apiclient.ProviderCharge{{ID: "ch_1", Status: "succeeded"}, {ID: "ch_3", Status: "succeeded"}}, 0, 1, 2},
		{"succeeded, never charged", answer{status: "SUCCEEDED", chargeID: "c1"}, stored("SUCCEEDED", "c1", "ch_1"), nil, 0, 0, 1},
		{"not the provider's charge", answer{status: "SUCCEEDED", chargeID: "c1"}, stored("SUCCEEDED", "c1", "ch_9"), ok, 0, 0, 1},
		{"failed, and charged", answer{status: "FAILED"}, stored("FAILED", "", ""), ok, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &run{report: &Report{}}
			r.checkStored(&checkout{key: "k", answers: []answer{tc.told}}, tc.now, tc.charges)
			require.Equal(t, tc.lost, r.report.Lost, "lost")
			require.Equal(t, tc.doubled, r.report.Doubled, "doubled")
			require.Len(t, r.report.Problems, tc.problems, "%v", r.report.Problems)
		})
	}
}
