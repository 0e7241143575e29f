package systest

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/internal/apiclient"
	"chargeonce/lab/formation"
	"chargeonce/lab/formation/formationtest"
)

// failoverCheckout is one client's charge, retried with its key until final.
type failoverCheckout struct {
	key        string
	status     string
	chargeID   string
	started    time.Time
	finalAt    time.Time
	unanswered int // tries answered with an error or PROCESSING
}

// TestFailover_PrimaryKilledUnderLoad_NothingAcknowledgedIsLost runs
// checkouts from 8 clients against a server on a pg_auto_failover
// formation (a monitor, a primary and a synchronous standby), kills the
// primary's machine (its postmaster and keeper, SIGKILL) in the middle, and
// lets the clients retry as the demo does: the same key after
// SERVICE_UNAVAILABLE or PROCESSING. Then every key is final, every
// SUCCEEDED answer is still SUCCEEDED with the same charge on the new
// primary, and the provider holds exactly one charge per key.
func TestFailover_PrimaryKilledUnderLoad_NothingAcknowledgedIsLost(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dir := formationtest.Dir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, err := formation.Start(ctx, formation.Options{Dir: filepath.Join(dir, "formation"), Fast: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Stop(context.Background()) })
	// Replays must come from the database, not from the instance's memory.
	s := startServer(t, map[string]string{"DATABASE_URL": f.URL, "RESULT_CACHE_SIZE": "0", "DB_TIMEOUT": "2s"})
	require.NotContains(t, s.Output(), "asynchronous replication", "pg_auto_failover names a synchronous standby")

	var (
		mu        sync.Mutex
		checkouts []*failoverCheckout
		stop      atomic.Bool
		wg        sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				c := &failoverCheckout{key: newKey(), started: time.Now()}
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
					r, err := s.demo().ChargeCard(ctx, c.key, visa(1999))
					if err == nil && r.Final() {
						c.status, c.finalAt = r.Status, time.Now()
						if r.Charge != nil {
							c.chargeID = r.Charge.Id
						}
						break
					}
					c.unanswered++
					time.Sleep(100 * time.Millisecond) // the client's pause between tries
				}
				mu.Lock()
				checkouts = append(checkouts, c)
				mu.Unlock()
			}
		})
	}
	time.Sleep(2 * time.Second) // load on the first primary for a while
	old, err := f.KillPrimary(ctx)
	require.NoError(t, err)
	killed := time.Now()
	promoted, err := f.WaitPrimary(ctx, old, time.Minute)
	require.NoError(t, err)
	t.Logf("%s killed; %s promoted after %s", old.Name, promoted.Name, time.Since(killed).Round(time.Millisecond))
	// Load on the new primary for a while.
	var firstAfter time.Duration
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range checkouts {
			if c.started.After(killed) && c.status == apiclient.Succeeded {
				firstAfter = c.finalAt.Sub(killed)
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "a checkout started after the kill succeeds")
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()

	var longest time.Duration
	succeeded, acrossKill := 0, 0
	for _, c := range checkouts {
		require.NotEmpty(t, c.status, "checkout %s never reached a final answer", c.key)
		require.Equal(t, "SUCCEEDED", c.status, c.key)
		succeeded++
		if c.started.Before(killed) && c.finalAt.After(killed) {
			acrossKill++
		}
		longest = max(longest, c.finalAt.Sub(c.started))
		// What the client was told is what the new primary holds.
		st := s.chargeStatus(t, c.key)
		require.NotNil(t, st, "key %s was answered SUCCEEDED and is unknown after the failover", c.key)
		require.Equal(t, "SUCCEEDED", st.Status, c.key)
		require.Equal(t, c.chargeID, st.Charge.Id, "key %s: the same charge", c.key)
		require.Len(t, s.providerCharges(t, c.key), 1, "key %s: one provider charge", c.key)
	}
	t.Logf("%d checkouts succeeded (%d in flight at the kill); first success started after the kill %s after it; longest checkout %s",
		succeeded, acrossKill, firstAfter.Round(time.Millisecond), longest.Round(time.Millisecond))
	require.Greater(t, succeeded, 20)
	// A request that could not release its lease during the failover goes
	// on trying once the new primary is up, so no client waits for the 30 s
	// lease to run out: the longest checkout is about the failover's length.
	require.Less(t, longest, 20*time.Second, "a checkout waited for a lease to end")
}
