package payment

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/sqlc"
)

// pages is the page that each of the rows of table named by ids is on, in
// the order of ids.
func pages(t *testing.T, pool *pgxpool.Pool, table string, ids []uuid.UUID) []int64 {
	t.Helper()
	out := dbtest.Query[int64](t, pool, "SELECT (r.ctid::text::point)[0]::bigint FROM unnest($1::uuid[]) WITH ORDINALITY AS u (id, n) JOIN "+
		table+" r USING (id) ORDER BY n", ids)
	require.Len(t, out, len(ids))
	return out
}

// moved is how many rows are on another page than before.
func moved(before, after []int64) int {
	n := 0
	for i := range before {
		if after[i] != before[i] {
			n++
		}
	}
	return n
}

// The relay's mark of an event (sent_at) writes its new version on the
// event's page, where it is HOT: the outbox's pages keep room for it.
// Elsewhere the update writes a row lock, the whole row and an entry in
// each of the event's indexes. Eighty charges, their events written one
// after another as recordings write them, then all marked sent in one
// statement, as the relay marks a batch. With the events' pages filled to
// 80%, 56 of the 80 moved.
func TestChargeRows_SentMark_StaysOnTheEventsPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s, m := storeWithMerchant(t, "pages")
	attempts := claimed(t, s, m, "k", 80)
	events := make([]uuid.UUID, len(attempts))
	for i, a := range attempts {
		done, _, err := s.succeed(ctx, a, fmt.Sprintf("ch_pages_%d", i), chargeDetail{}, nil, time.Now(), time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, done.Status)
		events[i] = dbtest.Query[uuid.UUID](t, pool, "SELECT id FROM charge_events WHERE attempt_id = $1", a.ID)[0]
	}
	written := pages(t, pool, "charge_events", events)
	require.Greater(t, len(dbtest.Query[int64](t, pool, "SELECT DISTINCT (ctid::text::point)[0]::bigint FROM charge_events")), 1,
		"the events fill more than a page")
	require.NoError(t, sqlc.New(pool).MarkChargeEventsSent(ctx, sqlc.MarkChargeEventsSentParams{Now: time.Now(), Ids: events}))
	require.Zero(t, moved(written, pages(t, pool, "charge_events", events)), "events marked sent moved off their page")
}
