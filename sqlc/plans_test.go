package sqlc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// The relay's and retention's statements read the rows they work on, not
// the outbox: over an outbox of 20,000 events (time-ordered ids, a
// millisecond apart) and a queue of 50 (planned as the 20,000 it held
// before its last autovacuum), each reads less than half of the outbox's
// pages, under custom plans and under the generic plan, as the server's
// prepared statements get them. A relay's batch that joined the queue to
// the events was free to merge with the events' primary key from its
// first entry: every batch read the whole outbox.
func TestOutboxStatements_ReadTheirRowsNotTheWholeOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	merchant := uuid.New()
	_, err := pool.Exec(ctx, "INSERT INTO merchants (id, name) VALUES ($1, 'plans')", merchant)
	require.NoError(t, err)
	const events, queued = 20000, 50
	_, err = pool.Exec(ctx, `
		WITH e AS (
			SELECT g, now() - (`+fmt.Sprint(events)+` - g) * interval '1 millisecond' AS at FROM generate_series(1, $2::integer) g
		)
		INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, body, occurred_at, sent_at)
		SELECT `+idAt("e.at", "substr(md5(e.g::text), 1, 19)")+`, 'charge.succeeded', $1, 'k-' || e.g, gen_random_uuid(),
			jsonb_build_object('type', 'charge.succeeded', 'padding', repeat('x', 500)), e.at,
			CASE WHEN e.g <= $2::integer - $3::integer THEN e.at + interval '5 milliseconds' END
		FROM e`, merchant, events, queued)
	require.NoError(t, err)
	// The queue as the planner finds it between two autovacuums: every
	// event went through it, and all but 50 have left it since.
	_, err = pool.Exec(ctx, "INSERT INTO charge_events_unsent (event_id) SELECT id FROM charge_events")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE charge_events; ANALYZE charge_events_unsent")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM charge_events_unsent u USING charge_events e
		WHERE e.id = u.event_id AND e.sent_at IS NOT NULL`)
	require.NoError(t, err)

	var pages int
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_relation_size('charge_events')::integer / 8192").Scan(&pages))
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
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(conn.Release)
		_, err = conn.Exec(ctx, "SET plan_cache_mode = "+mode)
		require.NoError(t, err)
		// buffers runs statement with args under EXPLAIN (ANALYZE, BUFFERS)
		// in a transaction it rolls back: the buffers its plan read, and
		// the plan.
		buffers := func(statement, args string) (int, string) {
			t.Helper()
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, "DEALLOCATE ALL")
			require.NoError(t, err)
			_, err = tx.Exec(ctx, "PREPARE s AS "+statement)
			require.NoError(t, err)
			var out string
			require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE s("+args+")").Scan(&out))
			var plan []struct {
				Plan struct {
					Hit  int `json:"Shared Hit Blocks"`
					Read int `json:"Shared Read Blocks"`
				}
			}
			require.NoError(t, json.Unmarshal([]byte(out), &plan))
			return plan[0].Plan.Hit + plan[0].Plan.Read, out
		}
		for _, s := range []struct{ what, statement, args string }{
			{"the relay's batch", lockUnsentChargeEvents, "100"},
			{"the relay's marking of its batch", markChargeEventsSent, "now(), " + ids},
			{"retention, with half the outbox past its cutoff", deleteSentChargeEvents, cutoff(10 * time.Second)},
			{"retention, with nothing past its cutoff", deleteSentChargeEvents, cutoff(time.Hour)},
		} {
			n, plan := buffers(s.statement, s.args)
			require.Less(t, n, pages/2, "%s (%s) reads less than half of the outbox's %d pages; its plan:\n%s", s.what, mode, pages, plan)
		}
	}
}

// idAt is SQL for a UUIDv7-like id of the time at (an expression): its
// Unix milliseconds, then '7' and the 19 hex digits of rest.
func idAt(at, rest string) string {
	return "(lpad(to_hex((extract(epoch FROM " + at + ") * 1000)::bigint), 12, '0') || '7' || " + rest + ")::uuid"
}
