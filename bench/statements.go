package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// statementSettings load pg_stat_statements into the bench's PostgreSQL
// for -statements, counting the statements that functions run (a CHECK's,
// charge_event_body's) as well as those the clients send.
var statementSettings = []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all"}

// createStatementStats makes pg_stat_statements readable in the bench's
// database.
func (b *bench) createStatementStats(ctx context.Context) error {
	return b.onDB(ctx, statementsWithin, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
		return err
	})
}

// resetStatementStats forgets what PostgreSQL counted so far, before the
// slice that statementStats reports.
func (b *bench) resetStatementStats() {
	if err := b.onDB(context.Background(), statementsWithin, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()")
		return err
	}); err != nil {
		b.logf("statements: reset: %v", err)
	}
}

// statementStats writes what the statements run since resetStatementStats
// cost, per request of the slice of run name at concurrency c, into
// OUT/statements/NAME-cC.txt: the statements that took the most of
// PostgreSQL's execution time first. A function's statements are counted
// within their caller's time too.
func (b *bench) statementStats(name string, c, requests int) {
	if requests == 0 {
		return
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# %s at concurrency %d: %d requests; pg_stat_statements over the slice, per request (a function's statements also within their caller's)\n", name, c, requests)
	err := b.onDB(context.Background(), statementsWithin, func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT calls::float8 / $1, total_exec_time * 1000 / $1, mean_exec_time * 1000,
			rows::float8 / greatest(calls, 1), wal_bytes::float8 / $1, toplevel, regexp_replace(query, '\s+', ' ', 'g')
			FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 30`, float64(requests))
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "calls/req\tµs/req\tµs/call\trows/call\tWAL B/req\ttop\tstatement\t")
		for rows.Next() {
			var calls, total, mean, perCall, wal float64
			var top bool
			var query string
			if err := rows.Scan(&calls, &total, &mean, &perCall, &wal, &top, &query); err != nil {
				return err
			}
			fmt.Fprintf(w, "%.2f\t%.1f\t%.1f\t%.1f\t%.0f\t%v\t%s\t\n", calls, total, mean, perCall, wal, top, shorten(query, 160))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return w.Flush()
	})
	dir := filepath.Join(b.opts.out, "statements")
	path := filepath.Join(dir, fmt.Sprintf("%s-c%d.txt", name, c))
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, []byte(out.String()), 0o644)
	}
	if err != nil {
		b.logf("statements %s-c%d: %v", name, c, err)
		return
	}
	b.logf("statements %s", path)
}

// statementsWithin bounds each of -statements' visits to the database.
const statementsWithin = 30 * time.Second

// onDB runs f on a connection of its own to the bench's database, all
// within the given time.
func (b *bench) onDB(ctx context.Context, within time.Duration, f func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return f(ctx, conn)
}

// shorten gives s in at most n runes.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
