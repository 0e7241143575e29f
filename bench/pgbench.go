package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The minimum SQL of one charge, as sqlc/charge_attempt.sql writes it: the
// claim (ClaimChargeAttempt's insert, committed on its own), then the
// recording (RecordChargeSucceeded: the fenced update, the charge row, the
// outbox event and its id on the relay's queue in one statement, committed
// on its own), with
// time-ordered ids as the server makes them (newIDSQL), no first provider
// key (a row keeps NULL for chargeonce_<id>), the claim's request and
// instance in their columns, and the event's body as a plain charge's
// holds it (nothing: the request's id is in its row, the rest the charge
// row's and its own row's). pgbench's ceiling
// for it is what the server's fresh-key throughput is measured against.
var claimFinalizeScript = strings.NewReplacer("new_id()", newIDSQL).Replace(`
\set r random(1, 9000000000000000)
INSERT INTO charge_attempts (id, merchant_id, idempotency_key, fingerprint, provider_key,
    amount, currency, payment_method, order_id, description, locked_until, expires_at, claim_request_id, claim_instance,
    created_at)
SELECT n.id, :merchant::uuid, 'pgb-' || :client_id || '-' || :r, '\x00'::bytea, NULL,
    1999, 'USD', 'pm_card_visa', NULL, NULL, now() + interval '30 seconds', now() + interval '24 hours',
    gen_random_uuid(), 'bench-1', now()
FROM (SELECT new_id() AS id) n
WHERE NOT EXISTS (SELECT 1 FROM charge_attempts t WHERE t.merchant_id = :merchant::uuid AND t.idempotency_key = 'pgb-' || :client_id || '-' || :r
    AND t.key_session_id IS NULL)
AND NOT EXISTS (SELECT 1 FROM charges c WHERE c.merchant_id = :merchant::uuid AND c.order_id = NULL)
ON CONFLICT (merchant_id, idempotency_key, key_session_id) DO NOTHING
RETURNING id AS attempt_id \gset
WITH done AS (
    UPDATE charge_attempts SET status = 'SUCCEEDED', charge_id = new_id(), completed_at = now(),
        expires_at = now() + interval '24 hours'
    WHERE id = :attempt_id::uuid AND status = 'PROCESSING' AND fence = 1
    RETURNING *
),
charge AS (
    INSERT INTO charges (id, merchant_id, amount, currency, order_id, description, provider_charge_id, created_at)
    SELECT done.charge_id, done.merchant_id, done.amount, done.currency, done.order_id, done.description,
        'ch_' || gen_random_uuid(), now()
    FROM done
),
event AS (
    INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, charge_id, body, request_id, occurred_at)
    SELECT new_id(), 'charge.succeeded', done.merchant_id, done.idempotency_key, done.id, done.charge_id,
        '{}'::jsonb, gen_random_uuid(), now()
    FROM done
    RETURNING id
),
queued AS (
    INSERT INTO charge_events_unsent (event_id) SELECT id FROM event
)
SELECT id FROM done;
`)

// newIDSQL makes a UUIDv7-like id in SQL (PostgreSQL 15 has no uuidv7()):
// 48 bits of Unix milliseconds, then random digits, as payment.newID's
// ids are laid out, so that the ceiling's inserts land in its indexes where
// the server's do.
var newIDSQL = idSQL("(extract(epoch FROM clock_timestamp()) * 1000)::bigint", "substr(md5(random()::text), 1, 19)")

// idSQL is SQL for a UUIDv7-like id: the Unix milliseconds ms (a bigint
// expression) in 12 hex digits, then '7' and the 19 hex digits of rest.
func idSQL(ms, rest string) string {
	return "(lpad(to_hex(" + ms + "), 12, '0') || '7' || " + rest + ")::uuid"
}

// The bare two-commit limit: what PostgreSQL does for the least any
// idempotent side effect must write, on this machine. A claim committed on
// its own (it must be durable before the side effect runs), then the
// finalize committed, on a table whose one index is its primary key: no
// charge row, no event, no order check. Fresh keys are measured against it
// as well as against chargeonce's own SQL.
const (
	twoCommitTable = `CREATE TABLE IF NOT EXISTS bench_two_commit (
    key    text PRIMARY KEY,
    status text NOT NULL,
    result text
)`
	twoCommitScript = `
INSERT INTO bench_two_commit (key, status) VALUES ('k-' || gen_random_uuid(), 'PROCESSING')
ON CONFLICT (key) DO NOTHING
RETURNING key AS claim_key \gset
UPDATE bench_two_commit SET status = 'SUCCEEDED', result = 'ch_1' WHERE key = :claim_key::text AND status = 'PROCESSING';
`
)

// The minimal exactly-once ceiling: what exactly-once with an outbox must
// write and nothing more. A claim INSERT … ON CONFLICT DO NOTHING RETURNING
// on a table keyed by (merchant, key) with a status, an attempt number, a
// lease time and a result column, committed on its own; then one
// transaction that records the outcome on that row, fenced on the attempt
// number, and inserts one outbox row (a time-ordered id, the merchant, the
// key and a payload of about 200 bytes), committed. The recording is one
// statement, as chargeonce's own is, so the two differ in what they write,
// not in round trips. chargeonce's own SQL and its fresh charges are
// measured against it.
const (
	minimalTables = `CREATE TABLE IF NOT EXISTS bench_minimal_attempts (
    merchant_id  uuid NOT NULL,
    key          text NOT NULL,
    status       text NOT NULL,
    attempt      integer NOT NULL,
    locked_until timestamptz NOT NULL,
    result       text,
    PRIMARY KEY (merchant_id, key)
);
CREATE TABLE IF NOT EXISTS bench_minimal_outbox (
    id          uuid PRIMARY KEY,
    merchant_id uuid NOT NULL,
    key         text NOT NULL,
    payload     jsonb NOT NULL
)`
)

var minimalScript = strings.NewReplacer("new_id()", newIDSQL).Replace(`
INSERT INTO bench_minimal_attempts (merchant_id, key, status, attempt, locked_until)
VALUES (:merchant::uuid, gen_random_uuid()::text, 'PROCESSING', 1, now() + interval '30 seconds')
ON CONFLICT DO NOTHING
RETURNING key AS claim_key \gset
WITH done AS (
    UPDATE bench_minimal_attempts SET status = 'SUCCEEDED', result = 'ch_' || md5(random()::text)
    WHERE merchant_id = :merchant::uuid AND key = :claim_key::text AND attempt = 1 AND status = 'PROCESSING'
    RETURNING merchant_id, key, result
)
INSERT INTO bench_minimal_outbox (id, merchant_id, key, payload)
SELECT new_id(), merchant_id, key,
    jsonb_build_object('type', 'charge.succeeded', 'idempotency_key', key, 'charge', result,
        'amount', 1999, 'currency', 'USD', 'occurred_at', now())
FROM done;
`)

// replayLookupScript is GetChargeAttempt: the read that answers a replay.
const replayLookupScript = `
\set k random(1, :replay_keys)
SELECT a.*, c.provider_charge_id, c.created_at AS charge_created_at
FROM charge_attempts a
LEFT JOIN charges c ON c.id = a.charge_id
WHERE a.merchant_id = :merchant::uuid AND a.idempotency_key = 'bench-replay-' || :k::text;
`

// ceilings measures what PostgreSQL does for the same SQL with pgbench.
func (b *bench) ceilings(ctx context.Context, replayKeys int) error {
	bin, err := findPGProgram("pgbench")
	if err != nil {
		return err
	}
	vars := map[string]string{"merchant": b.merchant, "replay_keys": fmt.Sprint(replayKeys)}
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, twoCommitTable+";\n"+minimalTables)
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("the ceilings' tables: %w", err)
	}
	for _, s := range []struct{ name, what, script string }{
		{"pgbench-two-commit", "pgbench: the bare two-commit limit: a claim INSERT … ON CONFLICT DO NOTHING committed, then the finalize UPDATE committed, on a table with one primary key and nothing else", twoCommitScript},
		{"pgbench-minimal", "pgbench: the minimal exactly-once ceiling: a claim INSERT … ON CONFLICT DO NOTHING on a (merchant, key) table with a status, an attempt number, a lease time and a result, committed, then the fenced UPDATE of its outcome and one outbox row in one statement, committed", minimalScript},
		{"pgbench-claim-finalize", "pgbench: the claim INSERT … ON CONFLICT DO NOTHING, committed, then the recording (fenced UPDATE attempt, INSERT charge, INSERT event in one statement), committed", claimFinalizeScript},
		{"pgbench-replay-lookup", "pgbench: GetChargeAttempt, the read that answers a replay", replayLookupScript},
	} {
		run := Run{Name: s.name, What: s.what}
		for _, c := range b.opts.concs {
			f, _, err := pgbench(ctx, bin, b.dbURL, b.dataDir, s.script, c, b.opts.duration, vars)
			if err != nil {
				return err
			}
			b.logf("%-14s c=%-3d %8.0f/s  p50 %7.2f ms  p99 %7.2f ms  mean %6.2f ms  failed %d", s.name, c, f.Throughput, f.P50ms, f.P99ms, f.MeanMs, f.Errors)
			run.Figures = append(run.Figures, f)
		}
		b.results.Runs = append(b.results.Runs, run)
	}
	return b.bounds(ctx, bin, vars)
}

// findPGProgram looks for one of PostgreSQL's programs (pgbench,
// pg_waldump) where db/localpg looks for initdb: $PATH, then the newest
// /usr/lib/postgresql/*/bin, then /usr/local/pgsql/bin.
func findPGProgram(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.Reverse(dirs) // good enough for one installed version, as Debian has
	for _, d := range append(dirs, "/usr/local/pgsql/bin") {
		if p := filepath.Join(d, name); fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in $PATH, /usr/lib/postgresql/*/bin or /usr/local/pgsql/bin (apt-get install postgresql)", name)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

var (
	tpsLine     = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	latencyLine = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
	failedLine  = regexp.MustCompile(`number of failed transactions: (\d+)`)
)

// pgbench runs script at conc clients for d and returns its figures and
// its transactions' latencies in ms. Its
// summary has only a mean latency, so it also writes a per-transaction log
// into a temporary directory under logDir, from which come p50 and p99; the
// logs are deleted afterwards.
func pgbench(ctx context.Context, bin, dbURL, logDir, script string, conc int, d time.Duration, vars map[string]string) (Figures, []float64, error) {
	f, err := os.CreateTemp("", "chargebench-*.sql")
	if err != nil {
		return Figures{}, nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		return Figures{}, nil, err
	}
	f.Close()
	logs, err := os.MkdirTemp(logDir, "pgbench-log-")
	if err != nil {
		return Figures{}, nil, err
	}
	defer os.RemoveAll(logs)
	prefix := filepath.Join(logs, "tx")
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(conc), "-j", strconv.Itoa(min(conc, 2)),
		"-T", strconv.Itoa(max(1, int(d.Seconds()))), "-f", f.Name(), "--log", "--log-prefix=" + prefix}
	for k, v := range vars {
		args = append(args, "-D", k+"="+v)
	}
	out, err := exec.CommandContext(ctx, bin, append(args, dbURL)...).CombinedOutput()
	if err != nil {
		return Figures{}, nil, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	fig := Figures{Concurrency: conc}
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		return fig, nil, fmt.Errorf("pgbench: no tps in its output:\n%s", out)
	}
	fig.Throughput, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := latencyLine.FindSubmatch(out); m != nil {
		fig.MeanMs, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := failedLine.FindSubmatch(out); m != nil {
		fig.Errors, _ = strconv.Atoi(string(m[1]))
	}
	lat, err := readTxLogs(prefix)
	if err != nil {
		return fig, nil, err
	}
	fig.Requests = len(lat) + fig.Errors
	fig.P50ms, fig.P99ms = percentile(lat, 0.50), percentile(lat, 0.99)
	return fig, lat, nil
}

// readTxLogs reads the latencies, in ms, of pgbench's per-transaction logs
// under prefix: one file per thread (prefix.PID, prefix.PID.1, …), one line
// per transaction whose third field is its latency in µs, or a word
// ("failed", "skipped") for a transaction that has none.
func readTxLogs(prefix string) ([]float64, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("pgbench wrote no transaction log at %s.*", prefix)
	}
	var lat []float64
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			if us, err := strconv.ParseFloat(fields[2], 64); err == nil {
				lat = append(lat, us/1000)
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	return lat, nil
}

// percentile is the nearest-rank q-quantile of xs (sorted in place); 0 when
// there are none.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
