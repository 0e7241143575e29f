package formation

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The monitor moves a primary between primary and wait_primary as its
// standby comes and goes, and for a moment reports one while it assigns
// the other: the node is the primary throughout. A node being demoted, or
// a standby, is not.
func TestPrimaryOf_ThePrimaryWhileTheMonitorMovesItBetweenItsStates(t *testing.T) {
	nodes := []Node{{Name: "node_1", Port: 5001}, {Name: "node_2", Port: 5002}}
	for _, c := range []struct {
		reported, assigned string
		primary            bool
	}{
		{"primary", "primary", true},
		{"wait_primary", "wait_primary", true},
		{"primary", "wait_primary", true},
		{"wait_primary", "primary", true},
		{"single", "single", true},
		{"primary", "draining", false},
		{"demote_timeout", "demoted", false},
		{"secondary", "secondary", false},
		{"catchingup", "secondary", false},
	} {
		states := []nodeState{{"node_1", 5001, c.reported, c.assigned}, {"node_2", 5002, "secondary", "secondary"}}
		p, err := primaryOf(nodes, states)
		if c.primary {
			require.NoError(t, err, "%s assigned %s", c.reported, c.assigned)
			require.Equal(t, nodes[0], p)
		} else {
			require.Error(t, err, "%s assigned %s", c.reported, c.assigned)
		}
	}
}
