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

// prunable waits until every transaction that ended before it is older
// than the cluster's oldest snapshot, so that what they left behind can
// be pruned: in a busy database, the next charge's, some milliseconds
// later. Another test's transaction, in another database, holds it back
// for a while, and a backend reckons what it may prune again only when
// that oldest snapshot has moved.
func prunable(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	next := dbtest.Query[int64](t, pool, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")[0]
	require.Eventually(t, func() bool {
		return dbtest.Query[int64](t, pool, "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")[0] >= next
	}, 20*time.Second, 5*time.Millisecond)
}

// The pages of a charge's rows keep room for what is written to them
// next: an attempt's finalize writes its new version on the page its
// claim put it on, and the relay's mark of an event (sent_at) on the
// event's page, where it is HOT. Elsewhere, an update writes a row lock,
// the whole row and, for the event, an entry in each of its indexes.
// Eighty charges claimed one after another fill their pages as a batch of
// claims does, then are recorded one by one; the relay marks all their
// events in one statement, as it marks a batch. With the attempts' pages
// filled and the events' at 80%, 11 of the attempts and 56 of the events
// moved.
func TestChargeRows_FinalizeAndSentMark_StayOnTheirPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s, m := storeWithMerchant(t, "pages")
	attempts := claimed(t, s, m, "k", 80)
	ids := make([]uuid.UUID, len(attempts))
	for i, a := range attempts {
		ids[i] = a.ID
	}
	claimedOn := pages(t, pool, "charge_attempts", ids)
	require.Greater(t, len(dbtest.Query[int64](t, pool, "SELECT DISTINCT (ctid::text::point)[0]::bigint FROM charge_attempts")), 1,
		"the attempts fill more than a page")

	events := make([]uuid.UUID, len(attempts))
	for i, a := range attempts {
		done, _, err := s.succeed(ctx, a, fmt.Sprintf("ch_pages_%d", i), chargeDetail{}, nil, time.Now(), time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, done.Status)
		events[i] = dbtest.Query[uuid.UUID](t, pool, "SELECT id FROM charge_events WHERE attempt_id = $1", a.ID)[0]
		prunable(t, pool)
	}
	after := pages(t, pool, "charge_attempts", ids)
	require.Zero(t, moved(claimedOn, after), "finalized attempts moved off their claim's page: %v -> %v", claimedOn, after)

	written := pages(t, pool, "charge_events", events)
	require.NoError(t, sqlc.New(pool).MarkChargeEventsSent(ctx, sqlc.MarkChargeEventsSentParams{Now: time.Now(), Ids: events}))
	require.Zero(t, moved(written, pages(t, pool, "charge_events", events)), "events marked sent moved off their page")
}
