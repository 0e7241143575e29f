package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The baseline runs measure this build against another one, fresh keys
// and replays, both servers up at once on the same PostgreSQL (each on a
// database of its own) and loaded in alternating slices: a change's cost
// as a ratio of two builds measured in the same minutes, which the
// machine's drift between two separate runs hides.

// baselineConcs are the concurrencies the baseline runs compare, of
// the bench's own.
var baselineConcs = []int{8, 32}

// baselineTarget is how close this build must stay to the baseline's.
var baselineTarget = target{"≥ 0.95 at c=8, 32", ">=", 0.95, baselineConcs}

// baselineBinary is the baseline's server: the file rev names, or the
// build of git revision rev of this checkout, extracted with git archive
// into the bench's data directory. It also returns how the results name it.
func (b *bench) baselineBinary(ctx context.Context, rev string) (binary, name string, err error) {
	if st, err := os.Stat(rev); err == nil && !st.IsDir() {
		binary, err := filepath.Abs(rev)
		return binary, "the binary " + rev, err
	}
	out, err := exec.CommandContext(ctx, "git", "log", "-1", "--format=%h %s", rev).Output()
	if err != nil {
		return "", "", fmt.Errorf("-baseline %s: neither a file nor a git revision of this checkout: %w", rev, err)
	}
	name = strings.TrimSpace(string(out))
	src := filepath.Join(b.dataDir, "baseline-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", "", err
	}
	b.logf("building the baseline, %s", name)
	extract := exec.CommandContext(ctx, "sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", rev, src)
	if out, err := extract.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("extracting %s: %w\n%s", rev, err, out)
	}
	binary = filepath.Join(b.dataDir, "chargeonce-baseline")
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building %s: %w\n%s", rev, err, out)
	}
	return binary, name, nil
}

// baselineRuns loads this build's server and the baseline's in turns,
// fresh keys then replays, at baselineConcs.
func (b *bench) baselineRuns(ctx context.Context, primary string) error {
	binary, name, err := b.baselineBinary(ctx, b.opts.baseline)
	if err != nil {
		return err
	}
	// A database of its own for each, both new: the bench's own holds what
	// the runs before wrote, which a new one would not have to work around.
	urls, err := b.newDatabases(ctx, "ab_this", "ab_baseline")
	if err != nil {
		return err
	}

	env := b.serverEnv("ab-this", primary)
	env["DATABASE_URL"] = urls[0]
	this, err := startServer(ctx, b.binary, env)
	if err != nil {
		return err
	}
	defer this.stop()
	env = b.serverEnv("ab-baseline", primary)
	env["DATABASE_URL"] = urls[1]
	base, err := startServer(ctx, binary, env)
	if err != nil {
		return fmt.Errorf("the baseline's server: %w", err)
	}
	defer base.stop()

	var keys [2][]string
	for i, s := range []*server{this, base} {
		if keys[i], err = finishKeys(ctx, s, b.opts.replayKeys); err != nil {
			return fmt.Errorf("finishing keys to replay: %w", err)
		}
	}
	b.results.Baseline = name
	what := "the baseline runs: the same load on this build and on the baseline's, both servers up, in alternating slices"
	runs := []Run{
		{Name: "fresh-this", Provider: primary, What: "fresh keys on this build, " + what},
		{Name: "fresh-baseline", Provider: primary, What: "fresh keys on the baseline (" + name + ")"},
		{Name: "replay-this", Provider: primary, What: "replays on this build, " + what},
		{Name: "replay-baseline", Provider: primary, What: "replays on the baseline (" + name + ")"},
	}
	servers := []*server{this, base, this, base}
	legs := make([]leg, len(runs))
	for i := range runs {
		s, k := servers[i], keys[i%2]
		targeter := func() vegeta.Targeter { return freshTargeter(visaCard, s.URL) }
		if i >= 2 {
			targeter = func() vegeta.Targeter { return replayTargeter(k, s.URL) }
		}
		legs[i] = leg{run: &runs[i], servers: []*server{s}, targeter: targeter, pairedWithNext: i%2 == 0}
	}
	var concs []int
	for _, c := range b.opts.concs {
		if slices.Contains(baselineConcs, c) {
			concs = append(concs, c)
		}
	}
	// Three times the duration and twice the turns of the other runs: the
	// ratio is the point of these, and a cost of a few percent hides in the
	// noise of shorter ones. Each pair of legs swaps its order every turn.
	b.interleavedRunsFor(legs, concs, 2*b.opts.turns, 3*b.opts.duration)
	b.results.Runs = append(b.results.Runs, runs...)
	return nil
}

// newDatabases creates the databases names in the bench's cluster, dropping
// any of the same name first, and returns their URLs.
func (b *bench) newDatabases(ctx context.Context, names ...string) ([]string, error) {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	u, err := url.Parse(b.dbURL)
	if err != nil {
		return nil, err
	}
	urls := make([]string, len(names))
	for i, name := range names {
		for _, sql := range []string{"DROP DATABASE IF EXISTS " + name, "CREATE DATABASE " + name} {
			if _, err := conn.Exec(ctx, sql); err != nil {
				return nil, fmt.Errorf("the database %s: %w", name, err)
			}
		}
		u.Path = "/" + name
		urls[i] = u.String()
	}
	return urls, nil
}
