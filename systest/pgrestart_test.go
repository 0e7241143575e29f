package systest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db"
	"chargeonce/db/dbtest"
	"chargeonce/db/localpg"
	"chargeonce/internal/apiclient"
)

// TestPostgresRestartMidLoad_NoDoubleChargeAndRecovers restarts chargeonce's
// PostgreSQL while checkouts are being charged. Every checkout retries its one
// key until it succeeds, as a real client would; none may be charged twice,
// and the running server must recover by itself, without a restart.
func TestPostgresRestartMidLoad_NoDoubleChargeAndRecovers(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	const (
		checkouts   = 40
		launchEvery = 60 * time.Millisecond
		restartAt   = 10 // checkouts launched when PostgreSQL goes down
		outage      = time.Second
		loadBudget  = 20 * time.Second       // for all checkouts, outage included
		lease       = 2 * time.Second        // startServer's PROCESSING_LEASE
		interval    = 200 * time.Millisecond // and its RECONCILE_INTERVAL
	)
	pg, dbURL := startOwnPostgres(t)

	// The provider runs in a process of its own on a PostgreSQL of its own,
	// which stays up: what is measured is chargeonce losing its database, not
	// the provider losing its. (Not the shared test server either: the test
	// neither needs it nor leaves it running.)
	_, providerDB := startOwnPostgres(t)
	provider := startServer(t, map[string]string{"DATABASE_URL": providerDB, "RECONCILE_INTERVAL": "1h"})
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": provider.URL + "/provider"})
	// A client whose requests cannot outlast the test's budget.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer httpClient.CloseIdleConnections()
	client := apiclient.New(s.URL, apiclient.DemoAPIKey, httpClient)

	// The load: checkouts start one after another, half of them slow at the
	// provider, so that some are between the provider's answer and its
	// recording when the database goes away.
	results := make([]*checkout, checkouts)
	for i := range results {
		pm := "pm_card_visa"
		if i%2 == 1 {
			pm = "pm_card_slow"
		}
		results[i] = &checkout{key: newKey(), input: withPaymentMethod(pm), codes: map[string]int{}}
	}
	loadStart := time.Now()
	// Ends early if the test fails, so that no client outlives it.
	loadCtx, cancel := context.WithDeadline(t.Context(), loadStart.Add(loadBudget))
	defer cancel()
	var running sync.WaitGroup
	var launched atomic.Int32
	restart := make(chan struct{})
	allLaunched := make(chan struct{})
	go func() {
		defer close(allLaunched)
		for i, c := range results {
			if i == restartAt {
				close(restart)
			}
			running.Go(func() { c.run(loadCtx, client) })
			launched.Add(1)
			time.Sleep(launchEvery) // the pace of the load
		}
	}()

	<-restart
	stopStart := time.Now()
	require.NoError(t, pg.Stop(context.Background()))
	stopped := time.Now()
	resp, err := httpClient.Get(s.URL + "/readyz")
	require.NoError(t, err, "the server answers while its database is down")
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "/readyz reports the database down")
	time.Sleep(time.Until(stopped.Add(outage))) // the outage lasts this long
	require.NoError(t, pg.Restart(context.Background()))
	restarted := time.Now()
	launchedDuringOutage := int(launched.Load()) - restartAt

	// /readyz comes back by itself: nothing restarts chargeonce.
	var readyAgain time.Time
	require.Eventually(t, func() bool {
		if client.Ready(t.Context()) != nil {
			return false
		}
		readyAgain = time.Now()
		return true
	}, time.Until(restarted.Add(10*time.Second)), 20*time.Millisecond, "/readyz not 200 within 10s of PostgreSQL's restart")

	<-allLaunched
	running.Wait()
	loadDone := time.Now()
	require.False(t, s.Exited(), "the server exited: %v", s.State())

	// No attempt is left PROCESSING once the leases taken before the outage
	// have run out and the reconciler has had a few passes. The load may
	// have lasted past that time: the count is read at least once.
	pool := dbtest.Open(t, dbURL)
	settleBy := restarted.Add(lease + 10*interval)
	var open int
	for {
		err = pool.QueryRow(t.Context(), "SELECT count(*) FROM charge_attempts WHERE status = 'PROCESSING'").Scan(&open)
		if err == nil && open == 0 || time.Now().After(settleBy) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err)
	require.Zero(t, open, "attempts still PROCESSING %s after PostgreSQL's restart", lease+10*interval)
	settled := time.Now()

	// Every checkout ends SUCCEEDED, through its retries or the reconciler,
	// with exactly one charge at the provider: the one recorded.
	statuses := map[string]int{}
	var tries, transportErrs, processing int
	codes := map[string]int{}
	for _, c := range results {
		final := s.finalStatus(t, c.key, time.Second) // final already: see above
		require.Equal(t, "SUCCEEDED", final.Status, "checkout %s", c.key)
		charges := provider.providerCharges(t, c.key)
		require.Len(t, charges, 1, "checkout %s: one charge at the provider", c.key)
		require.Equal(t, "succeeded", charges[0].Status, "checkout %s", c.key)
		require.Equal(t, charges[0].ID, final.Charge.ProviderChargeId, "checkout %s: the stored result is the provider's charge", c.key)
		if c.got != nil {
			require.Equal(t, final.Charge.Id, c.got.Charge.Id, "checkout %s: the client was told of the charge that is stored", c.key)
		}
		statuses[c.status()]++
		tries += c.tries
		transportErrs += c.transportErrs
		processing += c.processing
		for code, n := range c.codes {
			codes[code] += n
		}
	}
	for code := range codes {
		require.Equal(t, "SERVICE_UNAVAILABLE", code, "the only error a client may see while the database is down")
	}
	require.NotZero(t, transportErrs+len(codes)+processing, "no checkout noticed the outage: the restart missed the load")

	// One attempt and one recorded charge per checkout, none twice.
	require.Equal(t, checkouts, countRows(t, pool, "SELECT count(*) FROM charge_attempts"))
	require.Equal(t, checkouts, countRows(t, pool, "SELECT count(*) FROM charges"), "one recorded charge per checkout")

	logs := s.Output()
	require.NotContains(t, logs, "panic")
	t.Logf("PostgreSQL down %s after %d checkouts (stop took %s), %d more launched while down; up again after %s; /readyz 200 %s after the restart",
		outage, restartAt, stopped.Sub(stopStart).Round(time.Millisecond), launchedDuringOutage,
		restarted.Sub(stopped).Round(time.Millisecond), readyAgain.Sub(restarted).Round(time.Millisecond))
	t.Logf("load took %s, all attempts final %s after the restart; %d requests; as the clients last saw them %v; errors %v, transport errors %d, PROCESSING answers %d; "+
		"answers recorded late %d, settled by the reconciler %d",
		loadDone.Sub(loadStart).Round(time.Millisecond), settled.Sub(restarted).Round(time.Millisecond), tries, statuses, codes, transportErrs, processing,
		strings.Count(logs, "could not record the provider's answer"), strings.Count(logs, "reconcile: attempt finalized"))
}

// checkout is one checkout attempt: one key, retried until it succeeds.
type checkout struct {
	key   string
	input apiclient.ChargeCardInput

	got           *apiclient.ChargeResult // the SUCCEEDED answer, once there is one
	tries         int
	transportErrs int
	processing    int
	codes         map[string]int // extensions.code of the GraphQL errors seen
}

// run sends chargeCard with the checkout's key until it gets SUCCEEDED or
// FAILED, or until ctx ends. It retries on transport errors, GraphQL errors
// and PROCESSING, as a checkout should: with the same key, so never twice.
func (c *checkout) run(ctx context.Context, client *apiclient.Client) {
	for c.tries < 200 && ctx.Err() == nil {
		c.tries++
		r, err := client.ChargeCard(ctx, c.key, c.input)
		wait := 100 * time.Millisecond
		var answer *apiclient.Error
		switch {
		case errors.As(err, &answer):
			c.codes[answer.Code()]++
		case err != nil:
			c.transportErrs++
		case r.Status == "":
			c.codes["(no payload)"]++
		case r.Status == apiclient.Processing:
			c.processing++
			if hint := r.RetryAfter(); hint > 0 {
				wait = min(hint, 500*time.Millisecond)
			}
		default:
			c.got = r
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// status is what the client last knew: its final answer, or "gave up".
func (c *checkout) status() string {
	if c.got == nil {
		return "gave up"
	}
	return c.got.Status
}

// startOwnPostgres starts a PostgreSQL for this test alone, so that it can be
// restarted without disturbing the tests on the shared one (db/dbtest's), and
// returns it with the URL of its migrated database. It is stopped when the
// test ends.
func startOwnPostgres(t *testing.T) (*localpg.Server, string) {
	t.Helper()
	return ownPostgres(t, true)
}

// startDurablePostgres is startOwnPostgres with a server that keeps what it
// acknowledged (fsync and synchronous commits on), for a test that crashes
// it.
func startDurablePostgres(t *testing.T) (*localpg.Server, string) {
	t.Helper()
	return ownPostgres(t, false)
}

// ownPostgres starts a migrated PostgreSQL of the test's own, Fast or not.
func ownPostgres(t *testing.T, fast bool) (*localpg.Server, string) {
	t.Helper()
	dataDir := filepath.Join(postgresDir(t), "pg")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := localpg.Start(ctx, localpg.Options{Dir: dataDir, Fast: fast})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := pg.Stop(context.Background()); err != nil {
			t.Errorf("stop the test's PostgreSQL: %v", err)
		}
	})
	require.FileExists(t, filepath.Join(dataDir, "PG_VERSION"), "the cluster is in the test's directory, not a fallback")

	pool, err := db.Connect(ctx, pg.URL)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, db.Migrate(ctx, pool))
	return pg, pg.URL
}

// postgresDir is a temporary directory for the test's PostgreSQL servers.
// t.TempDir is 0700; as root, PostgreSQL runs as an unprivileged user,
// which must reach the data directories.
func postgresDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	return dir
}
