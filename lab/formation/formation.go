// Package formation runs a pg_auto_failover formation on loopback for the
// lab: a monitor and its PostgreSQL nodes, each run by a pg_autoctl keeper,
// as the project-local server runs PostgreSQL (localpg.Runner: the
// machine's binaries, an unprivileged user when root). The cluster and the
// failover tests kill its primary; the monitor promotes the synchronous
// standby.
package formation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	goretry "github.com/sethvargo/go-retry"

	"chargeonce/db/localpg"
)

// Options configures Start.
type Options struct {
	// Dir holds the monitor's and every node's data directory, and
	// pg_autoctl's configuration and state.
	Dir string
	// Nodes is how many PostgreSQL nodes the formation has: a primary and
	// Nodes-1 standbys, default 2.
	Nodes int
	// Fast tunes the monitor's health checks for tests, so that a dead
	// primary is failed over in seconds rather than in half a minute.
	Fast bool
	// Logger may be nil.
	Logger *slog.Logger
}

// Formation is a pg_auto_failover formation on loopback: a monitor and its
// PostgreSQL nodes, each run by a pg_autoctl keeper that this process
// started. The monitor promotes a standby when the primary fails; with one
// standby or more, commits wait for a synchronous standby (pg_auto_failover
// sets synchronous_standby_names), so a failover loses no acknowledged
// commit.
type Formation struct {
	// URL reaches the chargeonce database on whichever node is the primary:
	// every node, with target_session_attrs=read-write.
	URL string
	// MonitorURL is the monitor's database.
	MonitorURL string
	Nodes      []Node

	run     *localpg.Runner
	dir     string
	keepers []*keeper
	log     *slog.Logger
}

// keeper is a running pg_autoctl process; done closes when it exits.
type keeper struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// killed: KillPrimary ended it on purpose.
	killed bool
}

// Node is one PostgreSQL node of a formation.
type Node struct {
	Name    string // node_1, node_2, … as pg_autoctl names them
	Port    int
	DataDir string
}

// Start creates and starts a formation under opts.Dir, and returns
// once its first node is the primary and every other a secondary. Stop ends
// it; the keepers do not outlive the calling process's call to Stop.
func Start(ctx context.Context, opts Options) (*Formation, error) {
	opts.Nodes = cmp.Or(opts.Nodes, 2)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := exec.LookPath("pg_autoctl"); err != nil {
		return nil, errors.New("pg_auto_failover: pg_autoctl is missing; install Debian's postgresql-15-auto-failover and pg-auto-failover-cli")
	}
	run, err := localpg.NewRunner(opts.Dir, log)
	if err != nil {
		return nil, err
	}
	dir := run.Dir() // under the temp dir if the server's user cannot reach opts.Dir
	if err := clearFormation(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := run.Own(dir); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	f := &Formation{run: run, dir: dir, log: log}
	monitorPort, err := localpg.FreePort()
	if err != nil {
		return nil, err
	}
	user := run.Superuser()
	f.MonitorURL = fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", monitorPort)
	ok := false
	defer func() {
		if !ok {
			_ = f.Stop(context.WithoutCancel(ctx))
		}
	}()
	// --listen: pg_autoctl's listen_addresses is '*' otherwise, and these
	// clusters trust whoever connects.
	if err := f.keep("monitor", "create", "monitor", "--pgdata", filepath.Join(dir, "monitor"),
		"--pgport", strconv.Itoa(monitorPort), "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run"); err != nil {
		return nil, err
	}
	monitorAdmin := fmt.Sprintf("postgres://%s@127.0.0.1:%d/pg_auto_failover?sslmode=disable", user, monitorPort)
	if err := f.await(ctx, time.Minute, func() error {
		_, err := f.states(ctx)
		return err
	}); err != nil {
		return nil, fmt.Errorf("pg_auto_failover: the monitor did not start: %w%s", err, f.logTail("monitor"))
	}
	if opts.Fast {
		if err := tuneMonitor(ctx, monitorAdmin); err != nil {
			return nil, err
		}
	}
	hosts := make([]string, 0, opts.Nodes)
	for i := 1; i <= opts.Nodes; i++ {
		port, err := localpg.FreePort()
		if err != nil {
			return nil, err
		}
		node := Node{Name: fmt.Sprintf("node_%d", i), Port: port, DataDir: filepath.Join(dir, fmt.Sprintf("node%d", i))}
		if err := f.keep(node.Name, "create", "postgres", "--pgdata", node.DataDir, "--pgport", strconv.Itoa(port),
			"--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--name", node.Name, "--auth", "trust", "--no-ssl", "--dbname", localpg.Database,
			"--monitor", f.MonitorURL, "--run"); err != nil {
			return nil, err
		}
		f.Nodes = append(f.Nodes, node)
		hosts = append(hosts, "127.0.0.1:"+strconv.Itoa(port))
		if err := f.waitSettled(ctx, 2*time.Minute); err != nil {
			return nil, fmt.Errorf("pg_auto_failover: %s did not join: %w%s", node.Name, err, f.logTail(node.Name))
		}
		log.Info("pg_auto_failover: node joined", "node", node.Name, "port", port)
	}
	f.URL = fmt.Sprintf("postgres://%s@%s/%s?target_session_attrs=read-write&sslmode=disable", user, strings.Join(hosts, ","), localpg.Database)
	ok = true
	return f, nil
}

// clearFormation removes what an earlier formation left in dir, since a
// formation is always created anew (its ports are new), and refuses when
// one of its servers still runs.
func clearFormation(dir string) error {
	pidFiles, err := filepath.Glob(filepath.Join(dir, "*", "postmaster.pid"))
	if err != nil {
		return err
	}
	for _, path := range pidFiles {
		d := filepath.Dir(path)
		if pid, running, err := localpg.Postmaster(d); err == nil && running {
			return fmt.Errorf("pg_auto_failover: a formation still runs in %s (postgres pid %d in %s); stop it first", dir, pid, d)
		}
	}
	return os.RemoveAll(dir)
}

// tuneMonitor shortens the monitor's health checks and waits: a primary
// that does not answer for 3 s is failed over, instead of after 20 s and a
// 30 s wait for its demotion.
func tuneMonitor(ctx context.Context, adminURL string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, set := range []string{
		"pgautofailover.health_check_period = 1000",
		"pgautofailover.health_check_timeout = 1000",
		"pgautofailover.health_check_max_retries = 1",
		"pgautofailover.health_check_retry_delay = 500",
		"pgautofailover.node_considered_unhealthy_timeout = 3000",
		"pgautofailover.startup_grace_period = 2000",
		// How long the monitor waits for a lost primary's keeper to say it
		// demoted itself before it promotes a standby anyway.
		"pgautofailover.primary_demote_timeout = 3000",
	} {
		if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+set); err != nil {
			return fmt.Errorf("pg_auto_failover: tune the monitor: %w", err)
		}
	}
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	return err
}

// keep starts a pg_autoctl keeper (args name what it creates and runs), as
// the server's user, logging to name.log in the formation's directory.
func (f *Formation) keep(name string, args ...string) error {
	logFile, err := os.Create(filepath.Join(f.dir, name+".log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	// Its state (pid files) under the formation too: without
	// XDG_RUNTIME_DIR, pg_autoctl keeps it in /tmp/pg_autoctl, whose first
	// creation two formations starting at once race for ("File exists").
	runtimeDir := filepath.Join(f.dir, "run")
	if err := os.MkdirAll(runtimeDir, 0o700); err != nil {
		return err
	}
	cmd := exec.Command("pg_autoctl", args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + f.run.BinDir() + ":/usr/bin:/bin", "LC_ALL=C", "HOME=" + f.dir,
		"XDG_CONFIG_HOME=" + filepath.Join(f.dir, "config"), "XDG_DATA_HOME=" + filepath.Join(f.dir, "share"),
		"XDG_RUNTIME_DIR=" + runtimeDir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cred := f.run.Credential(); cred != nil {
		cmd.SysProcAttr.Credential = cred
		if err := f.run.Own(f.dir); err != nil {
			return err
		}
		if err := f.run.Own(runtimeDir); err != nil {
			return err
		}
		_ = os.Lchown(logFile.Name(), int(cred.Uid), int(cred.Gid))
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pg_auto_failover: start pg_autoctl %s: %w", name, err)
	}
	k := &keeper{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(k.done) }()
	f.keepers = append(f.keepers, k)
	return nil
}

// exited says which keeper has exited, if any: a formation without it
// will not settle.
func (f *Formation) exited() error {
	for _, k := range f.keepers {
		if k.killed {
			continue
		}
		select {
		case <-k.done:
			return fmt.Errorf("pg_autoctl %s exited%s", k.name, f.logTail(k.name))
		default:
		}
	}
	return nil
}

// nodeState is a node's state as the monitor sees it.
type nodeState struct {
	name               string
	port               int
	reported, assigned string
}

func (f *Formation) states(ctx context.Context) ([]nodeState, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.MonitorURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport, current_group_state::text, assigned_group_state::text
		FROM pgautofailover.current_state('default') ORDER BY node_id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (nodeState, error) {
		var s nodeState
		err := r.Scan(&s.name, &s.port, &s.reported, &s.assigned)
		return s, err
	})
}

// writable are the states of a node that takes writes: the monitor moves a
// primary between them as its standby comes and goes, reporting one while
// it assigns the other for a moment.
var writable = map[string]bool{"primary": true, "wait_primary": true, "single": true}

// Primary is the node that the monitor has as the primary, once one is.
func (f *Formation) Primary(ctx context.Context) (Node, error) {
	states, err := f.states(ctx)
	if err != nil {
		return Node{}, err
	}
	return primaryOf(f.Nodes, states)
}

// primaryOf is the node of nodes that states has as the primary.
func primaryOf(nodes []Node, states []nodeState) (Node, error) {
	for _, s := range states {
		if writable[s.reported] && writable[s.assigned] {
			for _, n := range nodes {
				if n.Port == s.port {
					return n, nil
				}
			}
		}
	}
	return Node{}, errors.New("pg_auto_failover: no primary now")
}

// waitSettled waits until the formation has one primary and every other
// node is a secondary. A standby's first copy waits for a checkpoint on the
// primary, which PostgreSQL spreads over minutes: one is asked for at once.
func (f *Formation) waitSettled(ctx context.Context, within time.Duration) error {
	return f.await(ctx, within, func() error {
		states, err := f.states(ctx)
		if err != nil {
			return err
		}
		if len(states) < len(f.Nodes) {
			return fmt.Errorf("%d of %d nodes registered", len(states), len(f.Nodes))
		}
		primaries, secondaries := 0, 0
		for _, s := range states {
			switch {
			case s.reported == s.assigned && s.reported == "primary" || len(states) == 1 && s.reported == "single":
				primaries++
			case s.reported == s.assigned && s.reported == "secondary":
				secondaries++
			case s.reported == "catchingup" || s.assigned == "catchingup":
				f.checkpointPrimary(ctx)
			}
		}
		if primaries != 1 || primaries+secondaries != len(states) {
			return fmt.Errorf("states %v", states)
		}
		return nil
	})
}

func (f *Formation) checkpointPrimary(ctx context.Context) {
	p, err := f.Primary(ctx)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", f.run.Superuser(), p.Port))
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	_, _ = conn.Exec(ctx, "CHECKPOINT")
}

// KillPrimary kills the primary as the loss of its machine would: its
// postmaster and its keeper, with SIGKILL (a keeper left alive would start
// PostgreSQL again before the monitor noticed anything). It returns the node
// that was the primary; its keeper stays dead until the formation stops.
func (f *Formation) KillPrimary(ctx context.Context) (Node, error) {
	p, err := f.Primary(ctx)
	if err != nil {
		return Node{}, err
	}
	for _, k := range f.keepers {
		if k.name == p.Name {
			k.killed = true
			_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	postmaster, _, err := localpg.Postmaster(p.DataDir)
	if err != nil {
		return Node{}, err
	}
	// The postmaster and every process it started (a backend whose
	// postmaster died would otherwise finish its query, commit included).
	for _, pid := range append([]int{postmaster}, children(postmaster)...) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return Node{}, err
		}
	}
	return p, nil
}

// Restart starts the keeper of a node that KillPrimary killed again, as
// the machine's coming back would: pg_autoctl rewinds it and it rejoins the
// formation as a standby. It returns once the formation has settled, or
// with an error after within.
func (f *Formation) Restart(ctx context.Context, node Node, within time.Duration) error {
	for _, k := range f.keepers {
		if k.name == node.Name {
			select {
			case <-k.done:
			default:
				return fmt.Errorf("pg_auto_failover: %s is running", node.Name)
			}
		}
	}
	f.keepers = slices.DeleteFunc(f.keepers, func(k *keeper) bool { return k.name == node.Name })
	if err := f.keep(node.Name, "run", "--pgdata", node.DataDir); err != nil {
		return err
	}
	if err := f.waitSettled(ctx, within); err != nil {
		return fmt.Errorf("pg_auto_failover: %s did not rejoin: %w%s", node.Name, err, f.logTail(node.Name))
	}
	return nil
}

// KeeperPID is the process (and process group) id of a node's keeper, or
// of the monitor's ("monitor"): kill -9 -- -PID ends it and its PostgreSQL,
// as the loss of the machine would.
func (f *Formation) KeeperPID(name string) int {
	for _, k := range f.keepers {
		if k.name == name {
			return k.cmd.Process.Pid
		}
	}
	return 0
}

// Dir is where the formation lives: the directory given to StartFormation,
// or the one under the temp dir that the server's user can reach.
func (f *Formation) Dir() string { return f.dir }

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	var kids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			if kid, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
				kids = append(kids, kid)
			}
		}
	}
	return kids
}

// WaitPrimary waits until a node other than old is the primary; with a zero
// old, until any node is. The monitor can have none for a moment, between
// two states of a node, or not answer under load.
func (f *Formation) WaitPrimary(ctx context.Context, old Node, within time.Duration) (Node, error) {
	var now Node
	err := goretry.Do(ctx, pollFor(within), func(ctx context.Context) error {
		p, err := f.Primary(ctx)
		if err != nil {
			return goretry.RetryableError(err)
		}
		if p.Port == old.Port {
			return goretry.RetryableError(errors.New("the old primary still is"))
		}
		now = p
		return nil
	})
	return now, err
}

// Stop stops every keeper (SIGTERM, which stops its PostgreSQL), then kills
// what is left of them after 30 s.
func (f *Formation) Stop(ctx context.Context) error {
	var errs []error
	// Nodes first, the monitor last.
	for i := len(f.keepers) - 1; i >= 0; i-- {
		k := f.keepers[i]
		pgid := -k.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-k.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-k.done
			errs = append(errs, fmt.Errorf("pg_auto_failover: pg_autoctl %s did not stop in 30 s", k.name))
		case <-ctx.Done():
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-k.done
			errs = append(errs, ctx.Err())
		}
	}
	f.keepers = nil
	return errors.Join(errs...)
}

func (f *Formation) logTail(name string) string {
	b, err := os.ReadFile(filepath.Join(f.dir, name+".log"))
	if err != nil {
		return ""
	}
	return "\n" + name + ".log:\n" + localpg.Tail(b, 30)
}

// pollFor looks again every 200 ms for up to within.
func pollFor(within time.Duration) goretry.Backoff {
	return goretry.WithMaxDuration(within, goretry.NewConstant(200*time.Millisecond))
}

// await calls check until it succeeds or within passes, and returns its
// last error then; a keeper that has exited ends the wait at once, as the
// formation cannot settle without it.
func (f *Formation) await(ctx context.Context, within time.Duration, check func() error) error {
	return goretry.Do(ctx, pollFor(within), func(context.Context) error {
		if err := f.exited(); err != nil {
			return err
		}
		return goretry.RetryableError(check())
	})
}
