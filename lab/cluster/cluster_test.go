package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAllocate_FixedPortsAreConsecutive(t *testing.T) {
	t.Parallel()
	a, err := DefaultPorts.allocate(3, 3)
	require.NoError(t, err)
	require.Equal(t, allocated{
		instance: []int{8081, 8082, 8083}, metrics: []int{9191, 9192, 9193},
		nats: []int{4241, 4242, 4243}, natsCluster: []int{6241, 6242, 6243},
	}, a)
}

// Free ports are picked while the ones before are still held, so no two
// parts are given the same port.
func TestAllocate_FreePortsAreAllDifferent(t *testing.T) {
	t.Parallel()
	a, err := Ports{}.allocate(3, 3)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, ports := range [][]int{a.instance, a.metrics, a.nats, a.natsCluster} {
		require.Len(t, ports, 3)
		for _, p := range ports {
			require.GreaterOrEqual(t, p, 20000)
			require.Less(t, p, 32000, "below the ephemeral ports that others' listens on port 0 take")
			require.False(t, seen[p], "port %d given twice", p)
			seen[p] = true
		}
	}
}
