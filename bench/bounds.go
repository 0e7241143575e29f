package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/db/localpg"
)

// The bounds: how far chargeonce's own SQL could come toward the minimal
// ceiling if its schema wrote less, each in pgbench beside the ceilings in
// the same run. They run on two scratch databases migrated to chargeonce's
// schema: one as it is, and one without the row rules of its three hot
// tables (the CHECKs that call charge_attempts_rules, charges_rules,
// charge_events_rules and charge_attempts_provider_key_rule for every row
// written). Both give the attempt a provider_charge_id column, where a
// charge's outcome would be kept without a charge row. The scripts:
//   - the minimal ceiling again, which the bounds are measured against;
//   - as is: claimFinalizeScript, on a database as fresh as the others;
//   - folded: the claim as it is, then the fenced update writes the
//     provider's charge id on the attempt, and the recording inserts the
//     outbox event alone: no charge row, no entry in the relay's queue.
//
// They are measurements for the owner of the targets, not levers: the
// schema keeps its charge rows, its queue and its rules.
var (
	boundsScripts = []struct {
		name, what, database, script string
	}{
		{"pgbench-bound-minimal", "pgbench: the minimal exactly-once ceiling (as pgbench-minimal), on the scratch database, just before the bounds of each concurrency", boundsDB, minimalScript},
		{"pgbench-bound-as-is", "pgbench: chargeonce's own SQL (as pgbench-claim-finalize), on a scratch database migrated for the bounds", boundsDB, claimFinalizeScript},
		{"pgbench-bound-no-rules", "pgbench: chargeonce's own SQL on a scratch database without the row rules of charge_attempts, charges and charge_events (their CHECKs dropped)", boundsNoRulesDB, claimFinalizeScript},
		{"pgbench-bound-folded", "pgbench: chargeonce's own SQL with the charge's outcome on the attempt (no charge row) and no entry in the relay's queue, rules kept", boundsDB, foldedScript},
		{"pgbench-bound-folded-no-rules", "pgbench: the folded SQL on the scratch database without the row rules", boundsNoRulesDB, foldedScript},
	}
	foldedScript = fold(claimFinalizeScript)
	// boundsConcs are the concurrencies the bounds run at: the targets'.
	boundsConcs = []int{8, 32}
)

// boundsTurns is how many slices of the duration each bound script takes
// at each concurrency.
const boundsTurns = 3

const (
	boundsDB        = "chargeonce_bounds"
	boundsNoRulesDB = "chargeonce_bounds_no_rules"
	boundsColumn    = `ALTER TABLE charge_attempts ADD COLUMN provider_charge_id text`
	dropRules       = `ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_rules, DROP CONSTRAINT charge_attempts_provider_key_check;
ALTER TABLE charges DROP CONSTRAINT charges_rules;
ALTER TABLE charge_events DROP CONSTRAINT charge_events_rules`
)

// fold turns the own-SQL script into the folded one: the charge row's
// insert goes, its provider id moves onto the attempt's update, and the
// queue's insert goes. It panics when the script no longer has what it
// replaces, so that a change to claimFinalizeScript cannot leave the bound
// measuring the old SQL.
func fold(script string) string {
	for _, r := range [][2]string{
		{"completed_at = now(),", "completed_at = now(), provider_charge_id = 'ch_' || gen_random_uuid(),"},
		{`charge AS (
    INSERT INTO charges (id, merchant_id, amount, currency, order_id, description, provider_charge_id, created_at)
    SELECT done.charge_id, done.merchant_id, done.amount, done.currency, done.order_id, done.description,
        'ch_' || gen_random_uuid(), now()
    FROM done
),
`, ""},
		{`,
queued AS (
    INSERT INTO charge_events_unsent (event_id) SELECT id FROM event
)`, ""},
	} {
		if strings.Count(script, r[0]) != 1 {
			panic(fmt.Sprintf("bench: the own-SQL script has %d of %q, want 1", strings.Count(script, r[0]), r[0]))
		}
		script = strings.Replace(script, r[0], r[1], 1)
	}
	return script
}

// bounds creates the scratch databases and runs the bound scripts at the
// targets' concurrencies (those of the run's), in boundsTurns turns of a
// slice of the duration each: at each concurrency every script runs once a
// turn, one after the other, the minimal ceiling first. A ratio compares
// slices a few seconds apart, not minutes, and a slow moment of the
// machine falls on every script.
func (b *bench) bounds(ctx context.Context, bin string, vars map[string]string) error {
	urls := map[string]string{}
	for _, name := range []string{boundsDB, boundsNoRulesDB} {
		u, err := b.scratchDatabase(ctx, name, name == boundsNoRulesDB)
		if err != nil {
			return fmt.Errorf("the bounds' database %s: %w", name, err)
		}
		urls[name] = u
	}
	slice := max(time.Second, b.opts.duration/boundsTurns)
	runs := make([]Run, len(boundsScripts))
	for i, s := range boundsScripts {
		runs[i] = Run{Name: s.name, What: s.what}
	}
	for _, c := range b.opts.concs {
		if !slices.Contains(boundsConcs, c) {
			continue
		}
		figs := make([][]Figures, len(boundsScripts))
		lats := make([][]float64, len(boundsScripts))
		for range boundsTurns {
			for i, s := range boundsScripts {
				f, lat, err := pgbench(ctx, bin, urls[s.database], b.dataDir, s.script, c, slice, vars)
				if err != nil {
					return err
				}
				figs[i], lats[i] = append(figs[i], f), append(lats[i], lat...)
			}
		}
		for i, s := range boundsScripts {
			f := mergeSlices(figs[i], lats[i])
			b.logf("%-14s c=%-3d %8.0f/s  p50 %7.2f ms  p99 %7.2f ms  mean %6.2f ms  failed %d", s.name, c, f.Throughput, f.P50ms, f.P99ms, f.MeanMs, f.Errors)
			runs[i].Figures = append(runs[i].Figures, f)
		}
	}
	for _, r := range runs {
		if len(r.Figures) > 0 {
			b.results.Runs = append(b.results.Runs, r)
		}
	}
	return nil
}

// mergeSlices makes one figure of equal slices of one script at one
// concurrency: their mean throughput and mean latency, their errors and
// requests summed, and the percentiles of all their latencies.
func mergeSlices(parts []Figures, lat []float64) Figures {
	f := Figures{Concurrency: parts[0].Concurrency}
	for _, p := range parts {
		f.Throughput += p.Throughput / float64(len(parts))
		f.MeanMs += p.MeanMs / float64(len(parts))
		f.Errors += p.Errors
		f.Requests += p.Requests
	}
	f.P50ms, f.P99ms = percentile(lat, 0.50), percentile(lat, 0.99)
	return f
}

// scratchDatabase (re)creates the database name on the bench's PostgreSQL,
// migrates it to chargeonce's schema with the attempt's provider_charge_id
// column, drops the hot tables' row rules when noRules, and returns its URL.
func (b *bench) scratchDatabase(ctx context.Context, name string, noRules bool) (string, error) {
	u, err := localpg.CreateDatabase(ctx, b.dbURL, name)
	if err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool); err != nil {
		return "", err
	}
	ddl := boundsColumn + ";\n" + minimalTables
	if noRules {
		ddl += ";\n" + dropRules
	}
	if _, err := pool.Exec(ctx, ddl); err != nil {
		return "", err
	}
	return u, nil
}
