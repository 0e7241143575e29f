package sqlc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// The relay's and retention's statements read the rows they work on, not
// the outbox or the charges (and the relay's restoring of its queue, while
// the queue is whole, reads none of the outbox): over an outbox of 20,000
// events (time-ordered ids, a millisecond apart, each naming its charge)
// and a queue of 50 (planned as the 20,000 it held before its last
// autovacuum), each reads less than half of the outbox's pages (and the
// relay's batch, of the charges'), under custom plans and under the
// generic plan, as the server's prepared statements get them. A relay's batch that joined the
// queue to the events was free to merge with the events' primary key from
// its first entry: every batch read the whole outbox.
func TestOutboxStatements_ReadTheirRowsNotTheWholeOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, merchant := merchantDatabase(t)
	const events, queued = 20000, 50
	// Each event names its charge, whose row the relay's batch reads for
	// its body: the charges are as many, and wide enough that reading them
	// all would show.
	chargeID := idAt("e.at", "substr(md5('c' || e.g::text), 1, 19)")
	_, err := pool.Exec(ctx, `
		WITH e AS (
			SELECT g, now() - (`+fmt.Sprint(events)+` - g) * interval '1 millisecond' AS at FROM generate_series(1, $2::integer) g
		), charge AS (
			INSERT INTO charges (id, merchant_id, amount, currency, provider_charge_id, description, created_at)
			SELECT `+chargeID+`, $1, 1999, 'USD', 'ch_' || e.g, repeat('x', 300), e.at
			FROM e
		)
		INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, charge_id, body, occurred_at, sent_at)
		SELECT `+idAt("e.at", "substr(md5(e.g::text), 1, 19)")+`, 'charge.succeeded', $1, 'k-' || e.g, gen_random_uuid(), `+chargeID+`,
			jsonb_build_object('request', jsonb_build_object('id', 'r-' || e.g), 'padding', repeat('x', 500)), e.at,
			CASE WHEN e.g <= $2::integer - $3::integer THEN e.at + interval '5 milliseconds' END
		FROM e`, merchant, events, queued)
	require.NoError(t, err)
	// The queue as the planner finds it between two autovacuums: every
	// event went through it, and all but 50 have left it since.
	_, err = pool.Exec(ctx, "INSERT INTO charge_events_unsent (event_id) SELECT id FROM charge_events")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE charges; ANALYZE charge_events; ANALYZE charge_events_unsent")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM charge_events_unsent u USING charge_events e
		WHERE e.id = u.event_id AND e.sent_at IS NOT NULL`)
	require.NoError(t, err)

	var pages, chargePages int
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_relation_size('charge_events')::integer / 8192, pg_relation_size('charges')::integer / 8192").
		Scan(&pages, &chargePages))
	var unsent []string
	rows, err := pool.Query(ctx, "SELECT id::text FROM charge_events WHERE sent_at IS NULL")
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		unsent = append(unsent, "'"+id+"'")
	}
	require.NoError(t, rows.Err())
	require.Len(t, unsent, queued)
	ids := "ARRAY[" + strings.Join(unsent, ", ") + "]::uuid[]"
	cutoff := func(ago time.Duration) string {
		at := fmt.Sprintf("(now() - interval '%d milliseconds')", ago.Milliseconds())
		return idAt(at, "'0000000000000000000'") + ", " + at + ", 100"
	}

	// As the server's prepared statements are planned: custom plans first,
	// then the generic plan.
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, s := range []struct{ what, statement, args string }{
			{"the relay's restoring of its queue, whole", restoreChargeEventsQueue, ""},
			{"the relay's batch", unsentChargeEvents, "100"},
			{"the relay's marking of its batch", markChargeEventsSent, "now(), " + ids},
			{"retention, with half the outbox past its cutoff", deleteSentChargeEvents, cutoff(10 * time.Second)},
			{"retention, with nothing past its cutoff", deleteSentChargeEvents, cutoff(time.Hour)},
		} {
			n, plan := explain(t, pool, mode, s.statement, s.args)
			require.Less(t, n, pages/2, "%s (%s) reads less than half of the outbox's %d pages; its plan:\n%s", s.what, mode, pages, plan)
			if s.statement == restoreChargeEventsQueue {
				require.Zero(t, scanned(t, plan, "charge_events", ""), "%s (%s) does not scan the outbox; its plan:\n%s", s.what, mode, plan)
			}
			if s.statement == unsentChargeEvents {
				// The charges' scans alone: the queue's dead entries,
				// which the batch's scan of the queue steps over until
				// they are pruned, are not the charges'.
				c := scanned(t, plan, "charges", "")
				require.Less(t, c, chargePages/2, "%s (%s) reads less than half of the charges' %d pages; its plan:\n%s", s.what, mode, chargePages, plan)
			}
		}
	}
}

// Retention of attempts reads the attempts it forgets, not the table:
// over 20,000 attempts (time-ordered ids, a millisecond apart, each
// expiring a retention of 10 s after it was made), the oldest 50 still
// PROCESSING, its scans read less than a tenth of the table's pages to
// find its batch, with half of them expired and with none, under custom
// plans and the generic plan. No index names expires_at: the primary key
// bounds the scan. And the charges (as many) are not scanned for one that
// names a forgotten attempt as its duplicate: before an index of
// duplicate_of, each attempt forgotten read them all.
func TestAttemptRetention_ReadsWhatItForgetsNotTheTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, merchant := merchantDatabase(t)
	const attempts, processing = 20000, 50
	_, err := pool.Exec(ctx, `
		WITH a AS (
			SELECT g, now() - ($2::integer - g) * interval '1 millisecond' AS at FROM generate_series(1, $2::integer) g
		), i AS (
			SELECT g, at, `+idAt("a.at", "substr(md5(a.g::text), 1, 19)")+` AS id FROM a
		)
		INSERT INTO charge_attempts (id, merchant_id, idempotency_key, fingerprint, provider_key, amount, currency, payment_method,
		                             status, failure_code, failure_message, completed_at, created_at, locked_until, expires_at)
		SELECT i.id, $1, 'k-' || i.g, '\x00', 'chargeonce_' || i.id, 1999, 'USD', 'pm_card_visa',
			CASE WHEN i.g <= $3::integer THEN 'PROCESSING' ELSE 'FAILED' END,
			CASE WHEN i.g > $3::integer THEN 'card_declined' END, CASE WHEN i.g > $3::integer THEN 'declined' END,
			CASE WHEN i.g > $3::integer THEN i.at END, i.at, i.at, i.at + interval '10 seconds'
		FROM i`, merchant, attempts, processing)
	require.NoError(t, err)
	// The charges of as many attempts: forgetting an attempt clears the
	// duplicate_of of any charge that names it (ON DELETE SET NULL).
	_, err = pool.Exec(ctx, `INSERT INTO charges (id, merchant_id, amount, currency, provider_charge_id)
		SELECT gen_random_uuid(), $1, 1999, 'USD', 'ch_' || g FROM generate_series(1, $2::integer) g`, merchant, attempts)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE charge_attempts; ANALYZE charges")
	require.NoError(t, err)
	var pages int
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_relation_size('charge_attempts')::integer / 8192").Scan(&pages))
	cutoff := func(retention time.Duration) string {
		at := fmt.Sprintf("(now() - interval '%d milliseconds')", retention.Milliseconds())
		return idAt(at, "'0000000000000000000'") + ", now(), 100"
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, s := range []struct {
			what      string
			retention time.Duration
			deleted   int
		}{
			{"half of the attempts expired", 10 * time.Second, 100},
			{"none expired", time.Hour, 0},
		} {
			_, plan := explain(t, pool, mode, deleteExpiredChargeAttempts, cutoff(s.retention))
			n := scanned(t, plan, "charge_attempts", "Limit")
			require.Less(t, n, pages/10, "retention, %s (%s), reads less than a tenth of the attempts' %d pages to find its batch; its plan:\n%s", s.what, mode, pages, plan)
			var deleted, chargeScans int
			prepared(t, pool, mode, deleteExpiredChargeAttempts, func(tx pgx.Tx) {
				require.NoError(t, tx.QueryRow(ctx, "EXECUTE s("+cutoff(s.retention)+")").Scan(&deleted))
				require.NoError(t, tx.QueryRow(ctx, "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'charges'").Scan(&chargeScans))
			})
			require.Equal(t, s.deleted, deleted, "retention, %s (%s), forgets its batch", s.what, mode)
			require.Zero(t, chargeScans, "retention, %s (%s), reads no charge but those that name a forgotten attempt", s.what, mode)
		}
	}
}

// merchantDatabase is a new database with one merchant, and its id.
func merchantDatabase(t *testing.T) (*pgxpool.Pool, uuid.UUID) {
	t.Helper()
	pool := dbtest.NewPool(t)
	merchant := uuid.New()
	_, err := pool.Exec(context.Background(), "INSERT INTO merchants (id, name) VALUES ($1, 'plans')", merchant)
	require.NoError(t, err)
	return pool, merchant
}

// explain runs statement with args (SQL expressions) as a prepared
// statement planned under mode (plan_cache_mode), in EXPLAIN (ANALYZE,
// BUFFERS), and rolls it back: the buffers its plan read, and the plan.
func explain(t *testing.T, pool *pgxpool.Pool, mode, statement, args string) (int, string) {
	t.Helper()
	var out string
	execute := "EXECUTE s"
	if args != "" {
		execute += "(" + args + ")"
	}
	prepared(t, pool, mode, statement, func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+execute).Scan(&out))
	})
	var plan []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan))
	return plan[0].Plan.Hit + plan[0].Plan.Read, out
}

// scanned is the buffers that the scans of relation in plan (EXPLAIN's
// JSON) read, those under a node of type under only when under is not
// empty: under "Limit", what finding a batch cost, apart from what writing
// its rows did.
func scanned(t *testing.T, plan, relation, under string) int {
	t.Helper()
	type node struct {
		Type     string `json:"Node Type"`
		Relation string `json:"Relation Name"`
		Hit      int    `json:"Shared Hit Blocks"`
		Read     int    `json:"Shared Read Blocks"`
		Plans    []node `json:"Plans"`
	}
	var top []struct{ Plan node }
	require.NoError(t, json.Unmarshal([]byte(plan), &top))
	var sum func(n node, counted bool) int
	sum = func(n node, counted bool) int {
		total := 0
		if counted && n.Relation == relation && strings.HasSuffix(n.Type, "Scan") {
			total += n.Hit + n.Read
		}
		for _, c := range n.Plans {
			total += sum(c, counted || n.Type == under)
		}
		return total
	}
	return sum(top[0].Plan, under == "")
}

// prepared prepares statement as s, planned under mode, and runs fn in a
// transaction that it then rolls back, and deallocates s (a prepared
// statement outlives the transaction that made it).
func prepared(t *testing.T, pool *pgxpool.Pool, mode, statement string, fn func(tx pgx.Tx)) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() {
		_ = tx.Rollback(ctx)
		_, err := conn.Exec(ctx, "DEALLOCATE s")
		require.NoError(t, err)
	}()
	for _, q := range []string{"SET LOCAL plan_cache_mode = " + mode, "PREPARE s AS " + statement} {
		_, err = tx.Exec(ctx, q)
		require.NoError(t, err)
	}
	fn(tx)
}

// idAt is SQL for a UUIDv7-like id of the time at (an expression): its
// Unix milliseconds, then '7' and the 19 hex digits of rest.
func idAt(at, rest string) string {
	return "(lpad(to_hex((extract(epoch FROM " + at + ") * 1000)::bigint), 12, '0') || '7' || " + rest + ")::uuid"
}

// The history's read of an attempt's events reads the attempt's events,
// not the outbox: over 20,000 events of other attempts, each of three
// attempts with an event of every kind an attempt's event can be (its
// outcome, its 3-D Secure action, a refund's, a capture's, a void's, a
// duplicate's refund), it finds every one of them and reads less than a
// tenth of the outbox's pages, under custom plans and the generic plan.
func TestHistoryEvents_ReadTheAttemptsEventsNotTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, merchant := merchantDatabase(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, body, occurred_at, sent_at)
		SELECT gen_random_uuid(), 'charge.succeeded', $1, 'k-' || g, gen_random_uuid(),
			jsonb_build_object('padding', repeat('x', 500)), now(), now()
		FROM generate_series(1, 20000) g`, merchant)
	require.NoError(t, err)
	kinds := []string{"charge.requires_action", "charge.succeeded", "refund.succeeded", "charge.late_refunded",
		"charge.authorized", "charge.captured", "charge.voided", "charge.duplicate_refunded"}
	attempts := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for _, a := range attempts {
		for _, kind := range kinds {
			_, err := pool.Exec(ctx, `INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, body, occurred_at)
				VALUES (gen_random_uuid(), $1, $2, 'k', $3, '{}', now())`, kind, merchant, a)
			require.NoError(t, err)
		}
	}
	_, err = pool.Exec(ctx, "ANALYZE charge_events")
	require.NoError(t, err)

	var pages int
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_relation_size('charge_events')::integer / 8192").Scan(&pages))
	ids := fmt.Sprintf("ARRAY['%s', '%s', '%s']::uuid[]", attempts[0], attempts[1], attempts[2])
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		var found []string
		prepared(t, pool, mode, listHistoryEvents, func(tx pgx.Tx) {
			rows, err := tx.Query(ctx, "EXECUTE s("+ids+")")
			require.NoError(t, err)
			for rows.Next() {
				var (
					id, attempt    uuid.UUID
					kind           string
					occurred, sent *time.Time
				)
				require.NoError(t, rows.Scan(&id, &kind, &attempt, &occurred, &sent))
				found = append(found, attempt.String()+" "+kind)
			}
			require.NoError(t, rows.Err())
		})
		var want []string
		for _, a := range attempts {
			for _, kind := range kinds {
				want = append(want, a.String()+" "+kind)
			}
		}
		require.ElementsMatch(t, want, found, "%s: every event of the three attempts, and no other", mode)
		n, plan := explain(t, pool, mode, listHistoryEvents, ids)
		require.Less(t, n, pages/10, "the history's read of three attempts' events (%s) reads less than a tenth of the outbox's %d pages; its plan:\n%s", mode, pages, plan)
	}
}

// The batched claim and recording read the attempts of their batch, not
// the table: over 100,000 attempts PROCESSING and as many charges (each
// with an order), a claim of 64 keys (half of them taken, half with an
// order to check) and a recording of 64 attempts read less than half of
// the pages of either table (by their indexes: about 8 buffers a key of
// the attempts, 1,900 pages), under custom plans and the generic plan,
// which plans the arrays as of unknown length.
func TestBatchedClaimAndRecording_ReadTheirAttemptsNotTheTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, merchant := merchantDatabase(t)
	const attempts, batch = 100000, 64
	_, err := pool.Exec(ctx, `
		INSERT INTO charge_attempts (id, merchant_id, idempotency_key, fingerprint, amount, currency, payment_method,
		                             created_at, locked_until, expires_at)
		SELECT `+idAt("now() - g * interval '1 millisecond'", "substr(md5(g::text), 1, 19)")+`, $1, 'k-' || g, '\x00',
			1999, 'USD', 'pm_card_visa', now(), now() + interval '1 minute', now() + interval '1 day'
		FROM generate_series(1, $2::integer) g`, merchant, attempts)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO charges (id, merchant_id, amount, currency, provider_charge_id, order_id)
		SELECT gen_random_uuid(), $1, 1999, 'USD', 'ch_' || g, 'o-' || g FROM generate_series(1, $2::integer) g`, merchant, attempts)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE charge_attempts; ANALYZE charges")
	require.NoError(t, err)

	// SQL arrays of batch elements each: element(i) is the i-th's SQL.
	array := func(typ string, element func(i int) string) string {
		elems := make([]string, batch)
		for i := range elems {
			elems[i] = element(i)
		}
		return "ARRAY[" + strings.Join(elems, ", ") + "]::" + typ + "[]"
	}
	ids := dbtest.Query[uuid.UUID](t, pool, "SELECT id FROM charge_attempts ORDER BY random() LIMIT $1", batch)
	quoted := func(s string) func(int) string { return func(int) string { return "'" + s + "'" } }
	newIDs := func(int) string { return "'" + uuid.NewString() + "'" }
	nows := quoted(time.Now().Format(time.RFC3339Nano))
	claimArgs := strings.Join([]string{
		array("uuid", newIDs), array("uuid", quoted(merchant.String())),
		array("text", func(i int) string { return fmt.Sprintf("'k-%d'", i*attempts/batch+i%2*attempts) }), // every other one taken
		array("bytea", quoted(`\x00`)), array("text", quoted("")), array("bigint", quoted("1999")), array("text", quoted("USD")),
		array("text", quoted("pm_card_visa")), array("text", func(i int) string { return []string{"''", fmt.Sprintf("'o-new-%d'", i)}[i%2] }),
		array("text", quoted("")), array("timestamptz", nows),
		array("timestamptz", nows), array("text", quoted("")), array("uuid", quoted(uuid.Nil.String())), array("text", quoted("")),
		array("uuid", newIDs), array("text", quoted("plans")), array("jsonb", quoted("{}")), array("timestamptz", nows),
	}, ", ")
	recordArgs := strings.Join([]string{
		array("uuid", func(i int) string { return "'" + ids[i].String() + "'" }), array("integer", quoted("1")),
		array("uuid", newIDs), array("timestamptz", nows), array("timestamptz", nows),
		array("text", func(i int) string { return fmt.Sprintf("'ch_plans_%d'", i) }), array("uuid", newIDs),
		array("jsonb", quoted("{}")), array("uuid", newIDs), array("text", quoted("")), array("text", quoted("")),
	}, ", ")
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, s := range []struct{ what, statement, args string }{
			{"the batched claim", claimChargeAttempts, claimArgs},
			{"the batched recording", recordChargesSucceeded, recordArgs},
		} {
			_, plan := explain(t, pool, mode, s.statement, s.args)
			for _, table := range []string{"charge_attempts", "charges"} {
				var pages int
				require.NoError(t, pool.QueryRow(ctx, "SELECT pg_relation_size($1)::integer / 8192", table).Scan(&pages))
				n := scanned(t, plan, table, "")
				require.Less(t, n, pages/2, "%s (%s) reads less than half of the %d pages of %s; its plan:\n%s", s.what, mode, pages, table, plan)
			}
		}
	}
}
