package events

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// A relay plans its batch for the outbox as it is when it reads it. A new
// deployment's relay first reads an outbox of a few events, and its
// connection keeps the statements it prepared; a plan cached then (a
// sequential scan, the cheapest over a few rows) would read the whole
// outbox and every charge in each batch once they hold thousands, until
// autovacuum next analyzes them. Here: a relay of two connections sends
// twenty batches of ten events, reading up to 256 at a time as it does
// (PostgreSQL caches a statement's generic plan after its fifth custom
// one); then the outbox grows to 20,000 events, each with its charge, 50
// of them queued, and is not analyzed (autovacuum is off for the three
// tables, as it is between two of its visits); the relay's next batch
// sends the 50 and scans neither the outbox nor the charges sequentially.
// Before the relay planned each batch, that batch scanned the outbox
// twice and the charges once.
func TestRelayBatch_IsPlannedForTheOutboxAsItIsNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabase(t)
	seeder := dbtest.Open(t, dbURL)
	// The relay's pool as the server opens it (db.Connect), of two
	// connections: a batch commits its durability mark on one of its own.
	sized, err := url.Parse(dbURL)
	require.NoError(t, err)
	q := sized.Query()
	q.Set("pool_max_conns", "2")
	sized.RawQuery = q.Encode()
	relayPool := dbtest.Open(t, sized.String())
	_, err = seeder.Exec(ctx, `ALTER TABLE charge_events SET (autovacuum_enabled = off);
		ALTER TABLE charges SET (autovacuum_enabled = off);
		ALTER TABLE charge_events_unsent SET (autovacuum_enabled = off)`)
	require.NoError(t, err)
	merchant := uuid.New()
	_, err = seeder.Exec(ctx, "INSERT INTO merchants (id, name) VALUES ($1, 'relay')", merchant)
	require.NoError(t, err)

	seed := func(from, n, queued int) { seedEvents(t, seeder, merchant, from, n, queued) }
	relay := newStore(relayPool)
	batch := func(limit int) int {
		t.Helper()
		sent, pubErr, err := relay.relayBatch(ctx, limit, func(events []outboxEvent) ([]uuid.UUID, error) {
			return idsOf(events), nil
		})
		require.NoError(t, err)
		require.NoError(t, pubErr)
		return sent
	}
	// seqScans is how often the outbox and the charges have been scanned
	// sequentially, once the seeder's and the relay's connections have
	// flushed their statistics (a backend flushes what
	// pg_stat_force_next_flush asks for before it answers the next
	// statement).
	seqScans := func() (events, charges int64) {
		t.Helper()
		for _, p := range []*pgxpool.Pool{seeder, relayPool} {
			conns := p.AcquireAllIdle(ctx)
			for _, c := range conns {
				_, err := c.Exec(ctx, "SELECT pg_stat_force_next_flush()")
				require.NoError(t, err)
			}
			// Released as they were taken: the connection that the
			// relay's batches ran on (the pool's last released) runs the
			// next.
			for i := len(conns) - 1; i >= 0; i-- {
				conns[i].Release()
			}
		}
		require.NoError(t, seeder.QueryRow(ctx, `SELECT
			(SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'charge_events'),
			(SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'charges')`).Scan(&events, &charges))
		return events, charges
	}

	for i := range 20 {
		seed(1+10*i, 10, 10)
		require.Equal(t, 10, batch(256), "a new outbox's events, as they come")
	}
	seed(201, 20000, 50)
	eventScans, chargeScans := seqScans()
	require.Equal(t, 50, batch(256), "the grown outbox's queued events, in one batch")
	eventScansAfter, chargeScansAfter := seqScans()
	require.Equal(t, eventScans, eventScansAfter, "the batch does not scan the 20,000 events of the outbox")
	require.Equal(t, chargeScans, chargeScansAfter, "the batch does not scan the 20,000 charges")
}

// idsOf is the ids of events: what a publisher that the broker took them
// all from acks.
func idsOf(events []outboxEvent) []uuid.UUID {
	ids := make([]uuid.UUID, len(events))
	for i, e := range events {
		ids[i] = e.id
	}
	return ids
}

// seedEvents writes n charge.succeeded events of merchant, a millisecond
// apart up to now, numbered from from, each with its charge; the last
// queued of them go on the relay's queue, the others are sent.
func seedEvents(t *testing.T, pool *pgxpool.Pool, merchant uuid.UUID, from, n, queued int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		WITH e AS (
			SELECT g, clock_timestamp() - ($3::integer - g) * interval '1 millisecond' AS at,
				gen_random_uuid() AS charge_id
			FROM generate_series($2::integer, $2::integer + $3::integer - 1) g
		), charge AS (
			INSERT INTO charges (id, merchant_id, amount, currency, provider_charge_id, description, created_at)
			SELECT e.charge_id, $1, 1999, 'USD', 'ch_' || e.g, repeat('x', 300), e.at FROM e
		), event AS (
			INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, charge_id, body, occurred_at, sent_at)
			SELECT (lpad(to_hex((extract(epoch FROM e.at) * 1000)::bigint), 12, '0') || '7' || substr(md5(e.g::text), 1, 19))::uuid,
				'charge.succeeded', $1, 'k-' || e.g, gen_random_uuid(), e.charge_id,
				jsonb_build_object('request', jsonb_build_object('id', 'r-' || e.g), 'padding', repeat('x', 500)), e.at,
				CASE WHEN e.g < $2::integer + $3::integer - $4::integer THEN e.at END
			FROM e
			RETURNING id, sent_at
		)
		INSERT INTO charge_events_unsent (event_id) SELECT id FROM event WHERE sent_at IS NULL`,
		merchant, from, n, queued)
	require.NoError(t, err)
}

// Relays on several instances share one outbox. They take turns, and none
// locks a row of the queue: while one publishes its batch, every queued
// row is free (another session locks them all at once, NOWAIT), and a
// second relay waits for the first's commit, then takes only what the first
// did not send. Each event goes to the broker once. A lock on each queued
// row wrote a WAL record per event, 56 B of a fresh charge's (bench,
// -waldump: Heap/LOCK); the relays' turn is a transaction's advisory lock,
// which writes none.
func TestRelayBatch_RelaysTakeTurns_NoQueuedRowLocked_EachEventSentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabase(t)
	seeder := dbtest.Open(t, dbURL)
	merchant := uuid.New()
	_, err := seeder.Exec(ctx, "INSERT INTO merchants (id, name) VALUES ($1, 'relays')", merchant)
	require.NoError(t, err)
	seedEvents(t, seeder, merchant, 1, 30, 30)
	first, second := newStore(dbtest.Open(t, dbURL)), newStore(dbtest.Open(t, dbURL))

	// send runs one batch of relay, handing its publisher's ids to published
	// and acking them once release is closed.
	type result struct {
		sent int
		err  error
	}
	send := func(relay *store, limit int, published chan<- []uuid.UUID, release <-chan struct{}) <-chan result {
		done := make(chan result, 1)
		go func() {
			sent, pubErr, err := relay.relayBatch(ctx, limit, func(events []outboxEvent) ([]uuid.UUID, error) {
				ids := idsOf(events)
				published <- ids
				<-release
				return ids, nil
			})
			done <- result{sent, errors.Join(pubErr, err)}
		}()
		return done
	}
	released := make(chan struct{})
	close(released)

	firstPublished, firstRelease := make(chan []uuid.UUID, 1), make(chan struct{})
	releaseFirst := sync.OnceFunc(func() { close(firstRelease) })
	// A failed assertion ends the first relay's batch too, before the
	// pools close.
	t.Cleanup(releaseFirst)
	firstDone := send(first, 20, firstPublished, firstRelease)
	firstIDs := <-firstPublished
	require.Len(t, firstIDs, 20, "the first relay's batch, up to its limit")

	// While the first publishes: every queued row can be locked by someone
	// else, at once.
	var free int
	tx, err := seeder.Begin(ctx)
	require.NoError(t, err)
	err = tx.QueryRow(ctx, "SELECT count(*) FROM (SELECT event_id FROM charge_events_unsent FOR UPDATE NOWAIT) q").Scan(&free)
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, err, "no queued row is locked while a relay publishes")
	require.Equal(t, 30, free)

	// The second relay waits for the first's turn to end: its backend waits
	// on the relays' advisory lock, and it has published nothing.
	secondPublished := make(chan []uuid.UUID, 1)
	secondDone := send(second, 256, secondPublished, released)
	require.Eventually(t, func() bool {
		select {
		case ids := <-secondPublished:
			t.Fatalf("the second relay published %d events during the first's batch", len(ids))
		default:
		}
		var waiting bool
		require.NoError(t, seeder.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory')`).Scan(&waiting))
		return waiting
	}, 10*time.Second, 10*time.Millisecond, "the second relay waits for the first")

	releaseFirst()
	require.Equal(t, result{sent: 20}, <-firstDone)
	secondIDs := <-secondPublished
	require.Equal(t, result{sent: 10}, <-secondDone)
	require.Len(t, secondIDs, 10, "the second relay takes what the first did not send")
	for _, id := range secondIDs {
		require.NotContains(t, firstIDs, id, "an event the first relay sent is not sent again")
	}
	var unsent, sent int
	require.NoError(t, seeder.QueryRow(ctx, `SELECT (SELECT count(*) FROM charge_events_unsent),
		(SELECT count(*) FROM charge_events WHERE sent_at IS NOT NULL)`).Scan(&unsent, &sent))
	require.Equal(t, 0, unsent)
	require.Equal(t, 30, sent)
}
