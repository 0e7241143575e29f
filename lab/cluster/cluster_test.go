package cluster

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/db/localpg"
	"chargeonce/internal/proc"
)

func TestPick_FixedPortsAreConsecutive(t *testing.T) {
	t.Parallel()
	c := &Cluster{listenFree: localpg.ListenFree}
	nats, err := c.pick(0, 3, DefaultPorts.NATS, DefaultPorts.NATSCluster)
	require.NoError(t, err)
	require.Equal(t, [][]int{{4241, 4242, 4243}, {6241, 6242, 6243}}, nats)
	third, err := c.pick(2, 1, DefaultPorts.Instance, DefaultPorts.Metrics)
	require.NoError(t, err)
	require.Equal(t, [][]int{{8083}, {9193}}, third)
}

// Free ports are picked while the ones before are still held, so no two
// parts are given the same port.
func TestPick_FreePortsAreAllDifferent(t *testing.T) {
	t.Parallel()
	kinds, err := (&Cluster{listenFree: localpg.ListenFree}).pick(0, 3, 0, 0, 0, 0)
	require.NoError(t, err)
	seen := map[int]bool{}
	require.Len(t, kinds, 4)
	for _, ports := range kinds {
		require.Len(t, ports, 3)
		for _, p := range ports {
			require.GreaterOrEqual(t, p, 20000)
			require.Less(t, p, 32000, "below the ephemeral ports that others' listens on port 0 take")
			require.False(t, seen[p], "port %d given twice", p)
			seen[p] = true
		}
	}
}

// squatter is a picked port's listener whose Close lets another program
// take the port at once, as a test running beside the cluster can: the
// port is listened on again, and held until the test ends.
type squatter struct {
	net.Listener
	t *testing.T
}

func (s squatter) Close() error {
	addr := s.Addr().String()
	err := s.Listener.Close()
	taken, lerr := net.Listen("tcp", addr)
	require.NoError(s.t, lerr)
	s.t.Cleanup(func() { taken.Close() })
	return err
}

// TestStartInstance_APortTakenAfterItsPick_StartsOnOthers plays another
// program that takes an instance's metrics port between the pick and the
// instance's listen: the instance exits on it, and is started again on
// other ports, where it serves.
func TestStartInstance_APortTakenAfterItsPick_StartsOnOthers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the chargeonce binary; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	binary := filepath.Join(dir, "chargeonce")
	require.NoError(t, proc.Build(ctx, ".", binary))
	dbURL := dbtest.NewDatabase(t)

	var picks atomic.Int32
	c := &Cluster{dir: dir, log: slog.New(slog.DiscardHandler), listenFree: func() (net.Listener, error) {
		l, err := localpg.ListenFree()
		// The instance's first pick is its port, the second its metrics'.
		if err == nil && picks.Add(1) == 2 {
			return squatter{l, t}, nil
		}
		return l, err
	}}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "logs"), 0o755))
	env := func(more map[string]string) map[string]string {
		m := map[string]string{"DATABASE_URL": dbURL, "EMBEDDED_NATS_PORT": "0"}
		maps.Copy(m, more)
		return m
	}
	p, err := c.startInstance(ctx, 0, Ports{}, binary, env)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop(30 * time.Second) })
	require.Equal(t, 1, strings.Count(Tail(p.Log, 1000), "address already in use"), "the first start lost its port:\n%s", Tail(p.Log, 20))
	require.EqualValues(t, 4, picks.Load(), "two ports a start, two starts")
	require.NoError(t, p.ready(ctx), "the instance serves on %s", p.URL)
}
