package systest

import (
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db"
	"chargeonce/db/dbtest"
	"chargeonce/db/localpg"
	"chargeonce/events"
	"chargeonce/events/eventstest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/testlog"
	"chargeonce/payment"
)

// startReplicatedPostgres starts, for this test alone, a primary with
// durable settings (synchronous_commit on) and a streaming standby of it,
// and waits until the standby streams. Both stop when the test ends.
func startReplicatedPostgres(t *testing.T) (primary, standby *localpg.Server) {
	t.Helper()
	dir := postgresDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, err := localpg.Start(ctx, localpg.Options{Dir: filepath.Join(dir, "primary")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = primary.Stop(context.Background()) })
	standby, err = localpg.StartStandby(ctx, primary, localpg.Options{Dir: filepath.Join(dir, "standby")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = standby.Stop(context.Background()) })
	pool := dbtest.Open(t, primary.AdminURL)
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").Scan(&n) == nil && n == 1
	}, time.Minute, 50*time.Millisecond, "the standby streams")
	return primary, standby
}

// hostPort is the host:port of a local server's URL.
func hostPort(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	return u.Host
}

// A server started on a database that replicates asynchronously says so at
// start, in a WARN line; once a synchronous standby is named, it does not.
func TestStart_AsynchronousStandby_Warns(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	primary, _ := startReplicatedPostgres(t)
	ctx := context.Background()

	async := startServer(t, map[string]string{"DATABASE_URL": primary.URL, "LOG_FORMAT": "json"})
	warned := testlog.JSONLines(t, async.Output(), func(l map[string]any) bool {
		msg, _ := l["msg"].(string)
		return l["level"] == "WARN" && strings.HasPrefix(msg, "asynchronous replication:")
	})
	require.Len(t, warned, 1, "one WARN at start:\n%s", async.Output())
	require.Contains(t, warned[0]["msg"], "synchronous_standby_names is empty")

	admin := dbtest.Open(t, primary.AdminURL)
	_, err := admin.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '*'")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "SELECT pg_reload_conf()")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var state string
		return admin.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication").Scan(&state) == nil && state == "sync"
	}, 30*time.Second, 50*time.Millisecond)

	durable := startServer(t, map[string]string{"DATABASE_URL": primary.URL})
	require.NotContains(t, durable.Output(), "asynchronous replication", "a synchronous standby: nothing to warn of")
	require.Equal(t, "SUCCEEDED", durable.chargeCard(t, apiclient.DemoAPIKey, newKey(), visa(100)).Status,
		"commits wait for the synchronous standby, and complete")

	// A session that does not wait for the standby is as unsafe.
	local := startServer(t, map[string]string{"DATABASE_URL": primary.URL + "&synchronous_commit=local"})
	require.Contains(t, local.Output(), `asynchronous replication: synchronous_commit is \"local\"`)
}

// DATABASE_URL may name several hosts: with target_session_attrs=read-write
// the server connects to whichever is the primary, and never reads from the
// standby, even for a replay. The standby's replay is paused, so a read
// there would not find the key that the primary holds.
func TestDatabaseURL_SeveralHosts_ConnectsToThePrimaryAndReplaysFromIt(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	primary, standby := startReplicatedPostgres(t)
	ctx := context.Background()
	standbyPool := dbtest.Open(t, standby.AdminURL)
	_, err := standbyPool.Exec(ctx, "SELECT pg_wal_replay_pause()")
	require.NoError(t, err)

	u, err := url.Parse(primary.URL)
	require.NoError(t, err)
	u.Host = hostPort(t, standby.URL) + "," + hostPort(t, primary.URL) // the standby first
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	s := startServer(t, map[string]string{"DATABASE_URL": u.String()})

	key := newKey()
	first := s.chargeCard(t, apiclient.DemoAPIKey, key, visa(1999))
	require.Equal(t, "SUCCEEDED", first.Status)
	replay := s.chargeCard(t, apiclient.DemoAPIKey, key, visa(1999))
	require.True(t, replay.Replayed)
	require.Equal(t, first.Charge.Id, replay.Charge.Id)
	status := s.chargeStatus(t, key)
	require.Equal(t, "SUCCEEDED", status.Status)

	// A new connection of the pool tries the standby first and leaves it at
	// once (target_session_attrs); none stays there.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var onStandby int
		require.NoError(c, standbyPool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND datname = 'chargeonce'`).Scan(&onStandby))
		require.Zero(c, onStandby, "no connection of the server stays on the standby")
	}, 5*time.Second, 20*time.Millisecond)
	var seen bool
	require.NoError(t, standbyPool.QueryRow(ctx, "SELECT pg_is_wal_replay_paused()").Scan(&seen))
	require.True(t, seen, "the standby was behind all along")
}

// The relay publishes only what the synchronous standby has. A commit
// whose wait for the standby is cut short (here: cancelled while no
// synchronous standby answers) is visible on the primary all the same, and
// a failover would rewind it; an event of it announced on the stream would
// tell consumers of an outcome that never was, and the outcome finalized
// again after the failover would be announced a second time. So the relay
// waits for the synchronous standby before it publishes: while none
// answers, it publishes nothing; once one does, everything.
func TestRelay_PublishesOnlyWhatTheSynchronousStandbyHas(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	primary, _ := startReplicatedPostgres(t)
	ctx := context.Background()
	admin := dbtest.Open(t, primary.AdminURL)
	syncStandby := func(names string) {
		t.Helper()
		for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '" + names + "'", "SELECT pg_reload_conf()"} {
			_, err := admin.Exec(ctx, q)
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { // a reload reaches the sessions a moment later
			var now string
			return admin.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&now) == nil && now == names
		}, 10*time.Second, 10*time.Millisecond)
	}
	pool := dbtest.Open(t, primary.URL)
	require.NoError(t, db.Migrate(ctx, pool))
	var merchant uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO merchants (id, name) VALUES (gen_random_uuid(), 'acme') RETURNING id").Scan(&merchant))

	// No synchronous standby answers (none has that name); an outcome's
	// commit waits for one, and the wait is cancelled.
	syncStandby("nobody")
	event := payment.Event{ID: uuid.New(), Type: payment.EventChargeSucceeded, OccurredAt: time.Now().UTC(), MerchantID: merchant,
		IdempotencyKey: "k", Amount: 100, Currency: "USD", Charge: &payment.EventCharge{ID: uuid.New(), ProviderChargeID: "ch_1"}}
	body, err := json.Marshal(event)
	require.NoError(t, err)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var pid int
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	require.Eventually(t, func() bool { // each backend takes a reload in its own time: this one must have it
		var names string
		return conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names) == nil && names == "nobody"
	}, 10*time.Second, 10*time.Millisecond)
	// A backend learns that a synchronous standby is named from the
	// checkpointer, a moment after the reload: until then its commits do not
	// wait. Such an insert is taken back (without waiting) and made again.
	var waited chan error
	deadline := time.Now().Add(30 * time.Second)
	for waits := false; !waits; {
		require.True(t, time.Now().Before(deadline), "the commit waits for a synchronous standby")
		waited = make(chan error, 1)
		go func() {
			_, err := conn.Exec(ctx, `WITH event AS (
					INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, body, occurred_at)
					VALUES ($1, 'charge.succeeded', $2, 'k', gen_random_uuid(), $3, now()) RETURNING id
				)
				INSERT INTO charge_events_unsent (event_id) SELECT id FROM event`, event.ID, merchant, body)
			waited <- err
		}()
		for committed := false; !waits && !committed; {
			select {
			case err := <-waited: // committed without waiting: take it back
				require.NoError(t, err)
				_, err = pool.Exec(ctx, "BEGIN; SET LOCAL synchronous_commit = local; DELETE FROM charge_events_unsent; DELETE FROM charge_events; COMMIT")
				require.NoError(t, err)
				committed = true
			case <-time.After(20 * time.Millisecond):
				require.True(t, time.Now().Before(deadline), "the commit waits for a synchronous standby")
				require.NoError(t, admin.QueryRow(ctx,
					"SELECT coalesce(wait_event = 'SyncRep', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waits))
			}
		}
	}
	_, err = admin.Exec(ctx, "SELECT pg_cancel_backend($1)", pid)
	require.NoError(t, err)
	require.NoError(t, <-waited, "PostgreSQL warns, and the commit stands on the primary without the standby's word")
	require.Equal(t, 1, dbtest.Query[int](t, pool, "SELECT count(*)::int FROM charge_events")[0], "visible all the same")

	broker := eventstest.New(t)
	js := broker.JetStream(t)
	relay := events.NewRelay(pool, js, events.RelayConfig{})
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	n, err := relay.RelayOnce(short)
	cancel()
	require.Error(t, err, "the relay waits for the synchronous standby, until its context ends")
	require.Zero(t, n)
	require.Empty(t, eventstest.ReadStream(t, js, events.Stream), "nothing unconfirmed is announced")

	syncStandby("*")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := relay.RelayOnce(ctx)
		require.NoError(c, err)
		require.Equal(c, 1, n)
	}, time.Minute, 100*time.Millisecond)
	require.Len(t, eventstest.ReadStream(t, js, events.Stream), 1, "once the standby confirms, it is announced")
}
