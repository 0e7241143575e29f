// Command bench is chargeonce's end-to-end benchmark (issue 11): it starts
// its own PostgreSQL and the real server binary, drives chargeCard with
// vegeta (fresh keys, replays of finished keys, both also spread over one
// to three instances, a duplicate storm over two instances), measures the
// same database's ceiling for the same SQL with pgbench and the server's
// own ceiling with a trivial query, and writes the figures, their ratios,
// tables and a chart under bench/results/. Run it from the repository
// root: `make bench` (full) or `make bench-smoke`.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"chargeonce/db/localpg"
	"chargeonce/internal/proc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the bench's flags.
type options struct {
	smoke bool
	// inFlightConcs are the concurrencies of the slow provider's many
	// checkouts in flight (fresh-300ms).
	inFlightConcs []int
	duration      time.Duration
	concs         []int
	replayKeys    int
	stormSize     int
	// scaleOut is how many instances the scale-out runs grow to.
	scaleOut int
	// growthKeys finished keys are stored before the growth runs, and
	// expiredKeys expired ones before the cleanup run; 0 skips them.
	growthKeys  int
	expiredKeys int
	out         string
	// customOut: -out was given, so docs/performance.md is left alone.
	customOut bool
	// render re-renders the results in out instead of running.
	render  bool
	dataDir string
	// only names the groups of runs to make (runGroups); empty: all.
	only map[string]bool
	// profile takes a CPU profile of the server during each server run at
	// profileConc, into OUT/profiles/.
	profile bool
	// waldump records the WAL of each server run's first slice at
	// recordConc by record type, into OUT/waldump/.
	waldump bool
	// statements records what each server run's first slice at
	// recordConc ran in PostgreSQL (pg_stat_statements), into
	// OUT/statements/.
	statements bool
	// serverBinary, when set, is the server measured instead of one built
	// from the checkout: another build under the same harness.
	serverBinary string
	// baseline, when set, is the build the baseline runs compare this one
	// with: a git revision of the checkout, or a binary.
	baseline string
	// latencyConcs are the loads under which the event latencies are
	// measured.
	latencyConcs []int
	// turns is how many slices the interleaved runs (the replays and the
	// trivial query) take at each concurrency.
	turns int
}

// runGroups are the parts of the bench that -only can select.
var runGroups = []string{"primary", "baseline", "cardsim", "slow", "latency", "storm", "scaleout", "ceilings", "growth"}

// wants says whether the run includes the group.
func (o options) wants(group string) bool { return len(o.only) == 0 || o.only[group] }

// updatesReadme says whether the run rewrites the latest run shown in
// docs/performance.md: only a full run into bench/results does.
func (o options) updatesReadme(r *Results) bool {
	return !o.smoke && !o.customOut && !r.Smoke && len(o.only) == 0 && o.serverBinary == ""
}

// performancePath is the performance document, from the root the bench
// runs in.
const performancePath = "docs/performance.md"

func parseOptions(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	fs.BoolVar(&o.smoke, "smoke", false, "short runs at concurrency 1 and 8, written to bench/results/smoke; no targets")
	fs.DurationVar(&o.duration, "duration", 0, "length of each run (default 10s, smoke 2s)")
	fs.StringVar(&o.out, "out", "", "where to write the results (default bench/results, smoke bench/results/smoke)")
	fs.BoolVar(&o.render, "render", false, "run nothing: render OUT/results.json again into results.md, chart.png and (for bench/results) the latest run in docs/performance.md")
	fs.StringVar(&o.dataDir, "data", ".data", "the project's data directory: the bench uses DATA/bench and DATA/bench-postgres")
	fs.IntVar(&o.growthKeys, "growth-keys", -1, "stored keys for the growth runs (default 10,000,000; smoke 0: no growth runs)")
	fs.IntVar(&o.expiredKeys, "expired-keys", -1, "expired keys for the cleanup run (default 1,000,000; smoke 0)")
	only := fs.String("only", "", "comma-separated groups of runs to make, of "+strings.Join(runGroups, ", ")+" (default all; a partial run leaves docs/performance.md alone)")
	fs.StringVar(&o.serverBinary, "server", "", "measure this chargeonce binary instead of building one from the checkout (another build under the same harness; a partial run leaves docs/performance.md alone)")
	fs.StringVar(&o.baseline, "baseline", "", "compare fresh keys and replays with this build, a git revision of the checkout or a binary, both servers up and loaded in alternating slices (the baseline group; none without it)")
	fs.IntVar(&o.turns, "turns", 0, "how many turns the replays and the trivial query take at each concurrency, interleaved, a slice of the duration each (default 5, smoke 2)")
	fs.BoolVar(&o.profile, "profile", false, "take a CPU profile of the server during each server run at concurrency 32 (or the highest below), into OUT/profiles/")
	fs.BoolVar(&o.waldump, "waldump", false, fmt.Sprintf("record the WAL that each server run's first slice at concurrency %d wrote, by record type (pg_waldump --stats=record), into OUT/waldump/", recordConc))
	fs.BoolVar(&o.statements, "statements", false, fmt.Sprintf("record the statements that each server run's first slice at concurrency %d ran, per request (pg_stat_statements, loaded for the run), into OUT/statements/", recordConc))
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *only != "" {
		o.only = map[string]bool{}
		for g := range strings.SplitSeq(*only, ",") {
			if !slices.Contains(runGroups, g) {
				return o, fmt.Errorf("-only: unknown group %q; the groups are %s", g, strings.Join(runGroups, ", "))
			}
			o.only[g] = true
		}
		if o.only["ceilings"] && !o.only["primary"] {
			return o, errors.New("-only: ceilings needs primary, whose finished keys its replay lookup reads")
		}
	}
	o.concs, o.replayKeys, o.stormSize, o.scaleOut = []int{1, 8, 32, 64}, 1000, 1000, 3
	o.inFlightConcs, o.latencyConcs = []int{256, 1024}, latencyConcs
	def, out, turns := 10*time.Second, filepath.Join("bench", "results"), 5
	if o.smoke {
		// Two instances are enough to keep the scale-out's round-robin from
		// rotting, and the smoke run under a minute.
		o.concs, o.replayKeys, o.stormSize, o.scaleOut = []int{1, 8}, 100, 200, 2
		o.inFlightConcs, o.latencyConcs = []int{64}, []int{32}
		def, out, turns = 2*time.Second, filepath.Join("bench", "results", "smoke"), 2
	}
	growth, expired := 10_000_000, 1_000_000
	if o.smoke {
		growth, expired = 0, 0
	}
	if o.growthKeys < 0 {
		o.growthKeys = growth
	}
	if o.expiredKeys < 0 {
		o.expiredKeys = expired
	}
	if o.duration == 0 {
		o.duration = def
	}
	if o.turns <= 0 {
		o.turns = turns
	}
	o.customOut = o.out != ""
	if !o.customOut {
		o.out = out
	}
	return o, nil
}

// bench holds what every run shares.
type bench struct {
	opts     options
	log      io.Writer
	binary   string
	dbURL    string
	pgDir    string // the bench's PostgreSQL's data directory
	dataDir  string
	merchant string
	results  Results
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	opts, err := parseOptions(args)
	if err != nil {
		return err
	}
	if opts.render {
		return render(opts, stdout)
	}
	started := time.Now()
	data, err := filepath.Abs(opts.dataDir)
	if err != nil {
		return err
	}
	unlock, err := lockData(data)
	if err != nil {
		return err
	}
	defer unlock()
	b := &bench{opts: opts, log: stdout, dataDir: filepath.Join(data, "bench")}
	b.results.Smoke, b.results.Duration = opts.smoke, opts.duration.String()
	if err := os.RemoveAll(b.dataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(b.dataDir, 0o755); err != nil {
		return err
	}

	if opts.serverBinary != "" {
		if b.binary, err = filepath.Abs(opts.serverBinary); err != nil {
			return err
		}
		b.results.Notes = append(b.results.Notes, "The server measured is a binary given with -server, not one built from this checkout.")
	} else {
		b.logf("building the server")
		b.binary = filepath.Join(b.dataDir, "chargeonce")
		if err := proc.Build(ctx, ".", b.binary); err != nil {
			return err
		}
	}

	// A fresh cluster each time: growth from earlier runs would skew the
	// figures.
	pgDir := filepath.Join(data, "bench-postgres")
	if err := localpg.Remove(ctx, pgDir); err != nil {
		return err
	}
	b.logf("starting PostgreSQL in %s", pgDir)
	pgOpts := localpg.Options{Dir: pgDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if opts.statements {
		pgOpts.Settings = statementSettings
	}
	pg, err := localpg.Start(ctx, pgOpts)
	if err != nil {
		return err
	}
	defer func() {
		if err := pg.Stop(context.Background()); err != nil {
			b.logf("stopping PostgreSQL: %v", err)
		}
	}()
	b.dbURL, b.pgDir = pg.URL, pgDir
	if opts.statements {
		if err := b.createStatementStats(ctx); err != nil {
			return err
		}
	}
	b.results.Machine = machine(ctx, pg.URL)

	if err := b.runAll(ctx); err != nil {
		return err
	}
	b.results.computeRatios(opts.concs)
	if err := b.results.write(opts.out); err != nil {
		return err
	}
	if opts.updatesReadme(&b.results) {
		if err := updateReadme(performancePath, &b.results); err != nil {
			return err
		}
		b.logf("%s shows this run", performancePath)
	}
	b.logf("done in %s; results in %s", time.Since(started).Round(time.Second), opts.out)
	return nil
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// serverEnv is the environment of one server instance: the bench's
// PostgreSQL, a free port,
// its own embedded broker and data directory, no merchant rate limit.
func (b *bench) serverEnv(name, provider string) map[string]string {
	return map[string]string{
		"DATABASE_URL":        b.dbURL,
		"PORT":                "0",
		"EMBEDDED_NATS_PORT":  "0",
		"DATA_DIR":            filepath.Join(b.dataDir, name),
		"LOG_FORMAT":          "json",
		"RATE_LIMIT_MERCHANT": "0",
		"PROVIDER":            provider,
		"SIM_SLOW_DELAY":      "0",
		// The profiler is served there (-profile).
		"METRICS_ADDR": "127.0.0.1:0",
	}
}

// runAll runs every measurement in order, the ceilings last so that their
// rows do not slow the server's runs.
func (b *bench) runAll(ctx context.Context) error {
	o := b.opts
	// The primary provider: instant when the binary knows it, else the
	// simulator.
	primary := "instant"
	var replayKeys int
	if o.wants("primary") {
		var err error
		if primary, replayKeys, err = b.primaryRuns(ctx); err != nil {
			return err
		}
	}
	if o.wants("baseline") && o.baseline != "" {
		if err := b.baselineRuns(ctx, primary); err != nil {
			return err
		}
	}
	if o.wants("cardsim") && primary != "cardsim" {
		sim, err := startServer(ctx, b.binary, b.serverEnv("cardsim", "cardsim"))
		if err != nil {
			return err
		}
		simRun := Run{Name: "fresh-cardsim", Provider: "cardsim", What: "chargeCard with a new key per request, PROVIDER=cardsim (the in-process simulator, which stores every charge)"}
		b.serverRuns(sim, &simRun, func() vegeta.Targeter { return freshTargeter(visaCard, sim.URL) })
		sim.stop()
		b.results.Runs = append(b.results.Runs, simRun)
	}
	if o.wants("slow") {
		if err := b.slowProvider(ctx); err != nil {
			return err
		}
		if primary == "instant" {
			if err := b.manyInFlight(ctx); err != nil {
				return err
			}
		}
	}
	if o.wants("latency") {
		if err := b.eventLatencies(ctx, o.latencyConcs); err != nil {
			return err
		}
	}
	if o.wants("storm") {
		if err := b.duplicateStorm(ctx); err != nil {
			return err
		}
	}
	if o.wants("scaleout") {
		if err := b.scaleOut(ctx, primary); err != nil {
			return err
		}
	}
	if o.wants("ceilings") {
		if err := b.ceilings(ctx, replayKeys); err != nil {
			return err
		}
	}
	if o.wants("growth") {
		if b.merchant == "" {
			// The growth runs store keys for the demo merchant, which a
			// server creates.
			srv, err := startServer(ctx, b.binary, b.serverEnv("primary", primary))
			if err != nil {
				return err
			}
			srv.stop()
			if b.merchant, err = demoMerchant(ctx, b.dbURL); err != nil {
				return err
			}
		}
		return b.growth(ctx, primary)
	}
	return nil
}

// primaryRuns measures fresh keys, replays and the trivial query on one
// server with the primary provider, and returns it and how many keys it
// finished for the replays.
func (b *bench) primaryRuns(ctx context.Context) (primary string, replayKeys int, err error) {
	primary = "instant"
	srv, err := startServer(ctx, b.binary, b.serverEnv("primary", primary))
	if err != nil {
		if !strings.Contains(err.Error(), "PROVIDER must be one of") {
			return "", 0, err
		}
		primary = "cardsim"
		b.results.Notes = append(b.results.Notes, "This binary refuses PROVIDER=instant: the fresh-key and replay runs use the in-process simulator (cardsim) instead.")
		b.logf("PROVIDER=instant refused by this binary: falling back to the simulator")
		if srv, err = startServer(ctx, b.binary, b.serverEnv("primary", primary)); err != nil {
			return "", 0, err
		}
	}
	defer srv.stop()
	if b.merchant, err = demoMerchant(ctx, b.dbURL); err != nil {
		return "", 0, err
	}

	fresh := Run{Name: "fresh", Provider: primary, What: fmt.Sprintf("chargeCard with a new idempotency key per request, PROVIDER=%s", primary)}
	b.serverRuns(srv, &fresh, func() vegeta.Targeter { return freshTargeter(visaCard, srv.URL) })

	b.logf("finishing %d keys to replay", b.opts.replayKeys)
	keys, err := finishKeys(ctx, srv, b.opts.replayKeys)
	if err != nil {
		return "", 0, fmt.Errorf("finishing keys to replay: %w", err)
	}
	// The same replays where every one reads the database (one statement):
	// what the first replay of a key on an instance costs.
	env := b.serverEnv("uncached", primary)
	env["RESULT_CACHE_SIZE"] = "0"
	uncachedSrv, err := startServer(ctx, b.binary, env)
	if err != nil {
		return "", 0, err
	}
	defer uncachedSrv.stop()

	replay := Run{Name: "replay", Provider: primary, What: fmt.Sprintf("chargeCard replaying %d finished keys in turn (the retry storm after an outage); after its first replay on the instance, a key is answered from the instance's result cache, and from its second with the answer the instance gave the same request before", len(keys))}
	trivial := Run{Name: "trivial", What: "`{__typename}` through the same server with the demo key: the HTTP + GraphQL ceiling"}
	uncached := Run{Name: "replay-uncached", Provider: primary, What: "as `replay` on a server with RESULT_CACHE_SIZE=0, whose memory holds no result and no answer: each replay reads the database, in one statement, for the answer an instance gave the same request before (during a storm of replays, as here), or for its attempt"}
	// What one round trip to the database costs, apart from any query's
	// work: the same server's probe with one (an empty statement) and
	// without, neither through GraphQL.
	probe := Run{Name: "probe", What: "GET /healthz: an HTTP request the server answers alone"}
	probeDB := Run{Name: "probe-db", What: "GET /readyz: an HTTP request the server answers after one empty round trip to the database"}
	// Interleaved, so that the replays and their ceiling are measured in the
	// same minutes.
	b.interleavedRuns([]leg{
		{run: &replay, servers: []*server{srv}, targeter: func() vegeta.Targeter { return replayTargeter(keys, srv.URL) }},
		{run: &trivial, servers: []*server{srv}, targeter: func() vegeta.Targeter { return trivialTargeter(srv.URL) }},
		{run: &uncached, servers: []*server{uncachedSrv}, targeter: func() vegeta.Targeter { return replayTargeter(keys, uncachedSrv.URL) }},
		{run: &probe, servers: []*server{srv}, targeter: func() vegeta.Targeter { return probeTargeter(srv.URL, "/healthz") }, ok: probeOK},
		{run: &probeDB, servers: []*server{srv}, targeter: func() vegeta.Targeter { return probeTargeter(srv.URL, "/readyz") }, ok: probeOK},
	}, b.opts.concs, b.opts.turns)
	b.results.Runs = append(b.results.Runs, fresh, replay, trivial, uncached, probe, probeDB)
	return primary, len(keys), nil
}

// serverRuns runs one kind of load at every concurrency, with the server's
// peak RSS for each.
func (b *bench) serverRuns(srv *server, run *Run, targeter func() vegeta.Targeter) {
	b.concRuns([]*server{srv}, run, b.opts.concs, targeter)
}

// concRuns runs one kind of load at each of concs against servers, over
// which the targeter spreads it, with the highest peak RSS among them.
func (b *bench) concRuns(servers []*server, run *Run, concs []int, targeter func() vegeta.Targeter) {
	b.interleavedRuns([]leg{{run: run, servers: servers, targeter: targeter}}, concs, 1)
}

// leg is one kind of load of an interleaved run: the run it adds figures
// to, the servers it loads and what it sends them.
type leg struct {
	run      *Run
	servers  []*server
	targeter func() vegeta.Targeter
	// ok says whether an answer is a success; nil: a GraphQL answer
	// without errors (graphQLOK).
	ok func(*vegeta.Result) bool
	// pairedWithNext: this leg and the next are one comparison (this build
	// and the baseline's), run in one order on even turns and the other on
	// odd ones, so that neither always follows the same load: a slice
	// after a fresh run meets the database still catching up on its
	// writes, one after a replay run a quiet one.
	pairedWithNext bool
}

// order is the order of legs on turn: as given, but each pair swapped on
// odd turns.
func order(legs []leg, turn int) []int {
	idx := make([]int, 0, len(legs))
	for i := 0; i < len(legs); i++ {
		if legs[i].pairedWithNext && i+1 < len(legs) {
			if turn%2 == 1 {
				idx = append(idx, i+1, i)
			} else {
				idx = append(idx, i, i+1)
			}
			i++
			continue
		}
		idx = append(idx, i)
	}
	return idx
}

// interleavedRuns runs the legs at each of concs in turns: each leg for a
// turns-th of the duration, then the next, turns times over. The machine's
// speed drifts within minutes; this way a drift falls on every leg alike, so
// that their ratios compare loads measured in the same minutes. Each leg's
// figures are its slices together; a profile covers its first slice.
func (b *bench) interleavedRuns(legs []leg, concs []int, turns int) {
	b.interleavedRunsFor(legs, concs, turns, b.opts.duration)
}

// interleavedRunsFor is interleavedRuns with each leg running for d in all.
func (b *bench) interleavedRunsFor(legs []leg, concs []int, turns int, d time.Duration) {
	slice := d / time.Duration(turns)
	for _, c := range concs {
		type acc struct {
			t                tally
			commits, walByte int64
			// unmeasured: the database's activity could not be read around
			// one of the slices, so the leg reports none.
			unmeasured bool
			peakRSS    float64
		}
		accs := make([]acc, len(legs))
		for i, l := range legs {
			accs[i].t.ok = l.ok
		}
		for turn := range turns {
			for _, i := range order(legs, turn) {
				l := legs[i]
				a := &accs[i]
				for _, s := range l.servers {
					s.resetPeakRSS()
				}
				var profiled func()
				if b.opts.profile && turn == 0 && c == profileConc(concs) {
					// The first instance stands for the others: each gets an
					// even share of the load.
					profiled = b.profileDuring(l.servers[0], fmt.Sprintf("%s-c%d", l.run.label(), c), slice)
				}
				recordStatements := b.opts.statements && turn == 0 && c == recordConc
				if recordStatements {
					b.resetStatementStats()
				}
				before, requests := b.dbActivity(), a.t.m.Requests
				a.t.attack(l.run.label(), l.targeter(), c, slice)
				if profiled != nil {
					profiled()
				}
				if recordStatements {
					b.statementStats(l.run.label(), c, int(a.t.m.Requests-requests))
				}
				if after := b.dbActivity(); before.ok && after.ok {
					a.commits += after.commits - before.commits
					a.walByte += after.walBytes - before.walBytes
					if b.opts.waldump && turn == 0 && c == recordConc && after.walBytes > before.walBytes {
						b.walRecords(l.run.label(), c, before.lsn, after.lsn, int(a.t.m.Requests-requests))
					}
				} else {
					a.unmeasured = true
				}
				for _, s := range l.servers {
					a.peakRSS = max(a.peakRSS, s.peakRSSMB())
				}
			}
		}
		for i, l := range legs {
			a := &accs[i]
			f := a.t.figures(c)
			if !a.unmeasured && f.Requests > 0 {
				f.CommitsPerRequest = float64(a.commits) / float64(f.Requests)
				f.WALBytesPerRequest = float64(a.walByte) / float64(f.Requests)
			}
			f.PeakRSSMB = a.peakRSS
			b.logf("%-14s c=%-3d %8.0f/s  p50 %7.2f ms  p99 %7.2f ms  errors %d  RSS %.0f MB  writes/req %.2f  WAL/req %.0f B",
				l.run.label(), c, f.Throughput, f.P50ms, f.P99ms, f.Errors, f.PeakRSSMB, f.CommitsPerRequest, f.WALBytesPerRequest)
			l.run.Figures = append(l.run.Figures, f)
		}
	}
}

// duplicateStorm sends one key from many clients at once to two instances
// with the simulator, and counts the simulator's charges for it.
func (b *bench) duplicateStorm(ctx context.Context) error {
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for _, name := range []string{"storm-a", "storm-b"} {
		s, err := startServer(ctx, b.binary, b.serverEnv(name, "cardsim"))
		if err != nil {
			return err
		}
		servers = append(servers, s)
		s.resetPeakRSS()
	}
	res, err := storm(ctx, servers, b.opts.stormSize)
	if err != nil {
		return err
	}
	n := res.ProviderCharges
	res.PeakRSSMB = max(servers[0].peakRSSMB(), servers[1].peakRSSMB())
	b.logf("storm          %d requests, 2 instances: %d provider charges, %d errors, all final after %.0f ms", res.Requests, n, res.Errors, res.AllFinalMs)
	b.results.Storm = &res
	return nil
}

func demoMerchant(ctx context.Context, dbURL string) (string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var id string
	err = conn.QueryRow(ctx, "SELECT id::text FROM merchants WHERE name = 'demo'").Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errors.New("no demo merchant in the database")
	}
	return id, err
}

// machine describes where the bench runs.
func machine(ctx context.Context, dbURL string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	if out, err := exec.CommandContext(ctx, "go", "version").Output(); err == nil {
		m.Go = strings.TrimSpace(strings.TrimPrefix(string(out), "go version "))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if conn, err := pgx.Connect(ctx, dbURL); err == nil {
		var v string
		if conn.QueryRow(ctx, "SHOW server_version").Scan(&v) == nil {
			m.Postgres = "PostgreSQL " + v
		}
		conn.Close(context.Background())
	}
	return m
}

// dbActivity is how many transaction ids the database has handed out (one
// per transaction that wrote) and where its WAL stands: both exact at
// once, unlike pg_stat_database, whose counts backends flush up to seconds
// late.
type dbActivity struct {
	ok                bool
	commits, walBytes int64
	lsn               string // the WAL position, as PostgreSQL spells it
}

func (b *bench) dbActivity() dbActivity {
	var a dbActivity
	err := b.onDB(context.Background(), 5*time.Second, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
			pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, pg_current_wal_lsn()::text`).Scan(&a.commits, &a.walBytes, &a.lsn)
	})
	if err != nil {
		return dbActivity{}
	}
	a.ok = true
	return a
}
