package db

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DurabilityWarning says what could lose a commit that PostgreSQL has
// acknowledged, or "" when nothing on this side could: no standby streams
// from the database (the loss of its machine stops checkouts, and its disk
// holds every commit), or every commit waits for a synchronous standby
// (synchronous_commit on or remote_apply, with synchronous_standby_names
// naming one, as pg_auto_failover's number_sync_standbys does). With
// asynchronous replication a failover can promote a standby that never
// received charges the primary acknowledged and chargeonce answered as
// SUCCEEDED: a standby then says the key was never used.
func DurabilityWarning(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var standbys, synchronous, hidden int
	var names, commit string
	// sync_state is hidden (NULL) from roles without pg_read_all_stats.
	err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')),
		count(*) FILTER (WHERE sync_state IS NULL),
		current_setting('synchronous_standby_names'), current_setting('synchronous_commit')
		FROM pg_stat_replication`).Scan(&standbys, &synchronous, &hidden, &names, &commit)
	if err != nil {
		return "", fmt.Errorf("read the replication settings: %w", err)
	}
	const risk = "a failover may lose charges that were answered as SUCCEEDED; name a synchronous standby (synchronous_standby_names, or pg_auto_failover's number_sync_standbys of 1 or more) and keep synchronous_commit on or remote_apply"
	switch {
	case standbys == 0:
		return "", nil
	case names == "":
		return fmt.Sprintf("asynchronous replication: %d standby(s) stream from this database and synchronous_standby_names is empty: %s", standbys, risk), nil
	case !slices.Contains([]string{"on", "remote_apply"}, commit):
		return fmt.Sprintf("asynchronous replication: synchronous_commit is %q, so a commit does not wait for the synchronous standby: %s", commit, risk), nil
	case synchronous == 0 && hidden == 0:
		return fmt.Sprintf("asynchronous replication: none of the %d standby(s) is synchronous yet (pg_stat_replication.sync_state): %s", standbys, risk), nil
	}
	return "", nil
}
