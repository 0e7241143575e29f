package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/internal/apiclient"
	"chargeonce/internal/proc"
	"chargeonce/lab/chaos"
	"chargeonce/lab/cluster"
	"chargeonce/lab/formation/formationtest"
)

// binaries builds the chargeonce server and the lab once per test run.
var binaries = sync.OnceValues(func() (map[string]string, error) {
	dir, err := os.MkdirTemp("", "chargeonce-lab-")
	if err != nil {
		return nil, err
	}
	bins := map[string]string{"server": filepath.Join(dir, "chargeonce"), "lab": filepath.Join(dir, "lab")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := proc.Build(ctx, ".", bins["server"]); err != nil {
		return nil, err
	}
	return bins, proc.Build(ctx, "./lab", bins["lab"])
})

// needsProcesses skips a lab test under go test -short, and gives the
// paths of the two binaries it runs.
func needsProcesses(t *testing.T) map[string]string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a cluster of processes; skipped with -short")
	}
	bins, err := binaries()
	require.NoError(t, err)
	return bins
}

// lab runs the lab's command line with args, and waits for it to end.
func lab(t *testing.T, dataDir string, args ...string) (*proc.Process, bool) {
	t.Helper()
	bins := needsProcesses(t)
	p, err := proc.Start(bins["lab"], proc.Options{Args: append(args, labFlags(args, bins)...),
		Env: map[string]string{"DATA_DIR": dataDir}})
	require.NoError(t, err)
	state, err := p.Wait(5 * time.Minute)
	require.NoError(t, err)
	return p, state.Success()
}

// labFlags points a cluster up at the test's server binary.
func labFlags(args []string, bins map[string]string) []string {
	if len(args) >= 2 && args[1] == "up" {
		return []string{"-binary", bins["server"]}
	}
	return nil
}

// TestCluster_UpServesOnEveryInstance_DownStopsEveryPart runs `lab cluster
// up` as make cluster does: it returns once the formation, the NATS
// nodes, the instances and the consumer run, and prints each part with the
// command that kills it. Each instance charges, a replay through another
// instance finds the charge, a second `cluster up` is refused, and
// `cluster down` leaves no process of the cluster behind.
func TestCluster_UpServesOnEveryInstance_DownStopsEveryPart(t *testing.T) {
	t.Parallel()
	dataDir := formationtest.Dir(t)
	up, ok := lab(t, dataDir, "cluster", "up", "-port", "0")
	require.True(t, ok, up.Output())
	state, err := cluster.ReadState(filepath.Join(dataDir, "cluster"))
	require.NoError(t, err)
	t.Cleanup(func() {
		if alive(state.Supervisor) {
			lab(t, dataDir, "cluster", "down")
		}
	})
	out := up.Output()
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

	var instances []*apiclient.Client
	for _, p := range state.Parts {
		if p.Role == "chargeonce instance" {
			require.Contains(t, out, p.URL)
			instances = append(instances, apiclient.New(p.URL, apiclient.DemoAPIKey, nil))
		}
	}
	ctx := context.Background()
	in := apiclient.ChargeCardInput{Amount: new(1999), Currency: new("USD"), PaymentMethod: "pm_card_visa"}
	for i, c := range instances {
		key := uuid.NewString()
		first, err := c.ChargeCard(ctx, key, in)
		require.NoError(t, err)
		require.Equal(t, apiclient.Succeeded, first.Status)
		again, err := instances[(i+1)%len(instances)].ChargeCard(ctx, key, in)
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, first.Charge.Id, again.Charge.Id)
	}

	twice, ok := lab(t, dataDir, "cluster", "up", "-port", "0")
	require.False(t, ok)
	require.Contains(t, twice.Output(), "a cluster is running already")

	down, ok := lab(t, dataDir, "cluster", "down")
	require.True(t, ok, down.Output())
	require.Contains(t, down.Output(), "cluster stopped")
	require.False(t, alive(state.Supervisor))
	for _, p := range state.Parts {
		require.ErrorIs(t, syscall.Kill(p.PID, 0), syscall.ESRCH, "%s (pid %d) is stopped", p.Name, p.PID)
	}
	again, ok := lab(t, dataDir, "cluster", "down")
	require.True(t, ok)
	require.Contains(t, again.Output(), "no cluster is running")
}

// TestChaos_ShortRun_LosesAndDoublesNothing is the short chaos run of
// make chaos, run as make chaos runs it: load, refunds, captures and voids
// included, on three instances while the primary, a NATS node and an
// instance are killed in turn, then every guarantee checked (see package
// chaos). It writes its results and its
// figures where -out and -readme say, and nowhere else.
func TestChaos_ShortRun_LosesAndDoublesNothing(t *testing.T) {
	t.Parallel()
	bins := needsProcesses(t)
	dir := formationtest.Dir(t)
	out, readme, cwd := filepath.Join(dir, "results"), filepath.Join(dir, "doc.md"), t.TempDir()
	require.NoError(t, os.WriteFile(readme, []byte("# Doc\n<!-- chaos:begin -->\nold\n<!-- chaos:end -->\nafter\n"), 0o644))
	p, err := proc.Start(bins["lab"], proc.Options{Dir: cwd, Env: map[string]string{"DATA_DIR": dir},
		Args: []string{"chaos", "-short", "-out", out, "-readme", readme, "-binary", bins["server"]}, Output: logWriter{t}})
	require.NoError(t, err)
	state, err := p.Wait(8 * time.Minute)
	require.NoError(t, err)
	require.True(t, state.Success(), "the chaos run passes")

	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	require.NoError(t, err)
	var report chaos.Report
	require.NoError(t, json.Unmarshal(b, &report))
	require.FileExists(t, filepath.Join(out, "results.md"))
	doc, err := os.ReadFile(readme)
	require.NoError(t, err)
	require.Contains(t, string(doc), report.Markdown(), "the figures are between the markers")
	require.NotContains(t, string(doc), "old")
	require.Contains(t, string(doc), "after")
	left, err := os.ReadDir(cwd)
	require.NoError(t, err)
	require.Empty(t, left, "nothing is written into the directory the run was started in")

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
	// The refund load refunded part of succeeded charges through the
	// kills, raced two refunds of one charge that could not both fit, and
	// stormed one refund across the instances.
	require.Positive(t, report.RefundSingles)
	require.Positive(t, report.RefundRaces)
	require.Positive(t, report.RefundStorms)
	require.Positive(t, report.RefundsSucceeded)
	require.Positive(t, report.RefundsRefused, "one refund of each race does not fit")
	require.Equal(t, report.RefundsSucceeded, report.ProviderRefunds)
	require.Zero(t, report.RefundsLost)
	require.Zero(t, report.RefundedTwice)
	require.Zero(t, report.RefundedBeyond)
	// The capture load captured authorizations in parts and in full, raced
	// two captures that could not both fit, voided some, and raced a
	// capture and a void, through the kills; the killed instance held two
	// captures' leases.
	require.Positive(t, report.CaptureParts)
	require.Positive(t, report.CaptureFulls)
	require.Positive(t, report.CaptureRaces)
	require.Positive(t, report.VoidStorms)
	require.Positive(t, report.CaptureVoidRaces)
	require.Positive(t, report.CapturesSucceeded)
	require.Positive(t, report.CapturesRefused, "one capture of each race does not fit, and one of a capture and a void loses")
	require.Positive(t, report.VoidsSucceeded)
	require.Equal(t, report.CapturesSucceeded, report.ProviderCaptures)
	require.Equal(t, report.VoidsSucceeded, report.ProviderVoids)
	require.Equal(t, 2, report.HeldCaptures)
	require.GreaterOrEqual(t, report.HeldCapturesLongest, 9*time.Second)
	require.Zero(t, report.CapturesLost)
	require.Zero(t, report.CapturedTwice)
	require.Zero(t, report.CapturedBeyond)
	require.Zero(t, report.CapturedAndVoided)
}

// TestLab_UnknownArguments_PrintTheUsage: the usage names what the lab
// does.
func TestLab_UnknownArguments_PrintTheUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"chaos", "extra"}, {"cluster"}, {"cluster", "sideways"}, {"bench"}} {
		err := run(context.Background(), args, func(string) string { return "" }, &strings.Builder{}, &strings.Builder{})
		require.ErrorIs(t, err, errUsage, "%v", args)
	}
	require.Contains(t, errUsage.Error(), "lab cluster up")
	require.Contains(t, errUsage.Error(), "lab chaos [-short] [-out DIR] [-readme PATH]")
}

// logWriter writes each line given to the test's log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
