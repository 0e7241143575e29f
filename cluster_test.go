package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/chaos"
	"chargeonce/cluster"
	"chargeonce/db/dbtest"
)

// formationDir is a temporary directory that PostgreSQL's unprivileged
// user can reach, for a pg_auto_failover formation.
func formationDir(t *testing.T) string {
	t.Helper()
	dbtest.RequirePgAutoctl(t)
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	return dir
}

// TestCluster_UpServesOnEveryInstance_DownStopsEveryPart runs `chargeonce
// cluster up` as make cluster does: it returns once the formation, the NATS
// nodes, the instances and the consumer run, and prints each part with the
// command that kills it. Each instance charges, a replay through another
// instance finds the charge, a second `cluster up` is refused, and `cluster
// down` leaves no process of the cluster behind.
func TestCluster_UpServesOnEveryInstance_DownStopsEveryPart(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DATA_DIR": formationDir(t)}
	up := spawn(t, vars, "cluster", "up", "-port", "0")
	require.True(t, up.wait(t, 5*time.Minute).Success(), up.logs.String())
	state, err := cluster.ReadState(filepath.Join(vars["DATA_DIR"], "cluster"))
	require.NoError(t, err)
	t.Cleanup(func() {
		if alive(state.Supervisor) {
			spawn(t, vars, "cluster", "down").wait(t, 3*time.Minute)
		}
	})
	out := up.logs.String()
	roles := map[string]int{}
	for _, p := range state.Parts {
		roles[p.Role]++
		require.True(t, alive(p.PID), "%s (pid %d) runs", p.Name, p.PID)
		require.Contains(t, out, p.Kill, "the summary says how to kill %s", p.Name)
	}
	require.Equal(t, map[string]int{"pg_auto_failover monitor": 1, "PostgreSQL primary": 1, "PostgreSQL standby": 1,
		"NATS node (JetStream)": 3, "chargeonce instance": 3, "receipts consumer": 1}, roles)
	require.Contains(t, out, "DATABASE_URL="+state.DatabaseURL)
	require.Contains(t, state.DatabaseURL, "target_session_attrs=read-write")
	require.Contains(t, out, "NATS_URL="+state.NATSURL)

	var instances []*testServer
	for _, p := range state.Parts {
		if p.Role == "chargeonce instance" {
			require.Contains(t, out, p.URL)
			instances = append(instances, &testServer{URL: p.URL, client: &http.Client{Timeout: time.Minute}})
		}
	}
	for i, s := range instances {
		key := newKey()
		first := s.chargeCard(t, "demo-key", key, visa(1999)).Data.ChargeCard
		require.NotNil(t, first)
		require.Equal(t, "SUCCEEDED", first.Status)
		again := instances[(i+1)%len(instances)].chargeCard(t, "demo-key", key, visa(1999)).Data.ChargeCard
		require.True(t, again.Replayed)
		require.Equal(t, first.Charge.ID, again.Charge.ID)
	}

	twice := spawn(t, vars, "cluster", "up", "-port", "0")
	require.False(t, twice.wait(t, time.Minute).Success())
	require.Contains(t, twice.logs.String(), "a cluster is running already")

	down := spawn(t, vars, "cluster", "down")
	require.True(t, down.wait(t, 3*time.Minute).Success(), down.logs.String())
	require.Contains(t, down.logs.String(), "cluster stopped")
	require.False(t, alive(state.Supervisor))
	for _, p := range state.Parts {
		require.ErrorIs(t, syscall.Kill(p.PID, 0), syscall.ESRCH, "%s (pid %d) is stopped", p.Name, p.PID)
	}
	again := spawn(t, vars, "cluster", "down")
	require.True(t, again.wait(t, time.Minute).Success())
	require.Contains(t, again.logs.String(), "no cluster is running")
}

// TestChaos_ShortRun_LosesAndDoublesNothing is the short chaos run of
// make chaos: load on three instances while the primary, a NATS node and
// an instance are killed in turn, then every guarantee checked (see
// package chaos).
func TestChaos_ShortRun_LosesAndDoublesNothing(t *testing.T) {
	t.Parallel()
	dir := formationDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	report, err := chaos.Run(ctx, chaos.Options{Binary: serverBinary(t), Dir: filepath.Join(dir, "chaos"), Short: true, Progress: logWriter{t}})
	require.NoError(t, err)
	t.Logf("\n%s", report.Markdown())
	require.Empty(t, report.Problems)
	require.Zero(t, report.Lost)
	require.Zero(t, report.Doubled)
	require.Zero(t, report.Changed)
	require.Len(t, report.Kills, 3)
	for _, k := range report.Kills {
		require.Positive(t, k.FirstSuccess, "a checkout after the kill of %s succeeded", k.Part)
	}
	require.Contains(t, report.Kills[0].Recovery, "promoted by pg_auto_failover")
	require.Greater(t, report.Succeeded, 100)
	require.Positive(t, report.Failed, "declined cards are in the load")
	require.Positive(t, report.Storms)
	require.Positive(t, report.Replays)
	require.Equal(t, report.Succeeded, report.Receipts)
	require.Equal(t, 3, report.StreamReplicas)
	// The instance killed mid-charge held its checkouts' leases: their
	// retries waited for the leases (10 s) to end, then took them over.
	require.Equal(t, 4, report.Held)
	require.GreaterOrEqual(t, report.HeldLongest, 9*time.Second)
}

// logWriter writes each line given to the test's log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
