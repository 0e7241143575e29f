// Command lab runs chargeonce beyond one machine, on loopback, for people
// and tests: `lab cluster up` starts a local cluster in the background (a
// pg_auto_failover formation, three NATS nodes, three instances and the
// receipts consumer) and `lab cluster down` stops it; `lab chaos` runs load
// on a cluster of its own while it kills its parts, and checks that nothing
// was lost or charged twice; `lab door` makes the public door's attacks on a
// server of its own and says what each made it do. It drives the chargeonce binary (bin/chargeonce,
// which make build writes) as a process, the way the benchmark does; the
// production binary knows nothing of it. make cluster, make cluster-down and
// make chaos run it.
//
// Its own parts run as lab processes too: `lab cluster supervise` owns a
// cluster that `cluster up` started, and `lab cluster nats-node` is one
// NATS node.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"chargeonce/db/localpg"
	"chargeonce/lab/chaos"
	"chargeonce/lab/cluster"
	"chargeonce/lab/door"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New(`usage:
  lab cluster up [-port N] [-binary PATH]
        start a local cluster in the background under DATA_DIR/cluster (default .data/cluster): a pg_auto_failover
        formation, 3 NATS nodes, 3 instances (on N.., default 8081; 0 picks free ports) and the receipts consumer;
        print how to kill each part
  lab cluster down
        stop the cluster that cluster up started
  lab chaos [-short] [-out DIR] [-readme PATH] [-binary PATH]
        the chaos run, on a cluster of its own under DATA_DIR/chaos; it writes results.md and results.json into DIR
        and its figures into the Markdown file PATH only when told to
  lab door [-rows 1,2,…] [-binary PATH]
        the public door's attacks (SECURITY.md), each on a server and a database of its own, on a PostgreSQL under
        DATA_DIR/door; print what each made the server do, as a Markdown table: run it with two binaries to compare
  lab trace [-binary PATH]
        Jaeger's all-in-one on loopback (bin/jaeger, built from tools/jaeger when missing) and a chargeonce server
        exporting its traces to it, until Ctrl-C; print the query API's address
-binary is the chargeonce binary the instances run (default bin/chargeonce, which make build writes)`)

// run runs the lab command of args until it is done or ctx ends (SIGINT,
// SIGTERM). getenv reads DATA_DIR.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	dataDir := cmp.Or(getenv("DATA_DIR"), ".data")
	switch {
	case len(args) >= 2 && args[0] == "cluster" && args[1] == "nats-node":
		return runNATSNode(ctx, args[2:], log)
	case len(args) >= 2 && args[0] == "cluster":
		return runCluster(ctx, dataDir, args[1], args[2:], stdout, log)
	case len(args) >= 1 && args[0] == "chaos":
		return runChaos(ctx, dataDir, args[1:], stdout)
	case len(args) >= 1 && args[0] == "trace":
		return runTrace(ctx, args[1:], stdout)
	case len(args) >= 1 && args[0] == "door":
		return runDoor(ctx, dataDir, args[1:], stdout, stderr)
	default:
		return errUsage
	}
}

// binaryFlag adds -binary to fset: the chargeonce binary the cluster runs.
func binaryFlag(fset *flag.FlagSet) *string {
	return fset.String("binary", filepath.Join("bin", "chargeonce"), "the chargeonce binary the instances run")
}

// serverBinary is the chargeonce binary at path, made absolute, since the
// cluster's processes run elsewhere.
func serverBinary(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("no chargeonce binary at %s: run make build, or give -binary: %w", path, err)
	}
	return abs, nil
}

// runCluster runs `cluster up|down|supervise`, the cluster under
// DATA_DIR/cluster.
func runCluster(ctx context.Context, dataDir, verb string, args []string, stdout io.Writer, log *slog.Logger) error {
	fset := flag.NewFlagSet("cluster "+verb, flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	port := fset.Int("port", cluster.DefaultPorts.Instance, "the first instance's port, the others' next to it; 0 picks free ports for every part")
	binary := binaryFlag(fset)
	if err := fset.Parse(args); err != nil || fset.NArg() != 0 {
		return errUsage
	}
	dir, err := filepath.Abs(filepath.Join(dataDir, "cluster"))
	if err != nil {
		return err
	}
	switch verb {
	case "down":
		return clusterDown(ctx, dir, stdout)
	case "up", "supervise":
	default:
		return errUsage
	}
	server, err := serverBinary(*binary)
	if err != nil {
		return err
	}
	if verb == "up" {
		return clusterUp(ctx, dir, *port, server, stdout)
	}
	ports := cluster.DefaultPorts
	ports.Instance = *port
	if *port == 0 {
		ports = cluster.Ports{}
	}
	return clusterSupervise(ctx, dir, ports, server, log)
}

// clusterUp starts the supervisor in the background, waits until it says
// the cluster is up, and prints the summary.
func clusterUp(ctx context.Context, dir string, port int, server string, stdout io.Writer) error {
	if s, err := cluster.ReadState(dir); err == nil && alive(s.Supervisor) {
		return fmt.Errorf("a cluster is running already (supervisor pid %d, under %s): make cluster-down stops it", s.Supervisor, dir)
	}
	// A cluster is started anew: what an earlier one left is gone.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "cluster.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(self, "cluster", "supervise", "-port", strconv.Itoa(port), "-binary", server)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own session: it outlives this command and the terminal's Ctrl-C.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	fmt.Fprintf(stdout, "starting the cluster (a pg_auto_failover formation, 3 NATS nodes, 3 instances, the receipts consumer); log: %s\n", logPath)
	deadline := time.After(5 * time.Minute)
	for {
		select {
		case <-exited:
			return fmt.Errorf("the cluster did not start:\n%s", cluster.Tail(logPath, 30))
		case <-deadline:
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
			return fmt.Errorf("the cluster did not start in 5 minutes (stopping it):\n%s", cluster.Tail(logPath, 30))
		case <-ctx.Done():
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if s, err := cluster.ReadState(dir); err == nil {
			s.Print(stdout)
			return nil
		}
	}
}

// clusterSupervise runs the cluster until SIGTERM or SIGINT, then stops it.
func clusterSupervise(ctx context.Context, dir string, ports cluster.Ports, server string, log *slog.Logger) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c, err := cluster.Up(ctx, cluster.Options{Dir: dir, Binary: server, Lab: self, Ports: ports, Logger: log})
	if err != nil {
		return err
	}
	state, err := c.State(ctx, os.Getpid())
	if err == nil {
		err = state.Write()
	}
	if err != nil {
		_ = c.Down(context.WithoutCancel(ctx))
		return err
	}
	log.Info("cluster up; SIGTERM stops it")
	<-ctx.Done()
	log.Info("stopping the cluster")
	err = c.Down(context.WithoutCancel(ctx))
	_ = os.Remove(filepath.Join(dir, cluster.StateFile))
	return err
}

// clusterDown stops the cluster that cluster up started: SIGTERM to its
// supervisor, which stops every part in order.
func clusterDown(ctx context.Context, dir string, stdout io.Writer) error {
	s, err := cluster.ReadState(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(stdout, "no cluster is running")
		return nil
	}
	if err != nil {
		return err
	}
	if !alive(s.Supervisor) {
		_ = os.Remove(filepath.Join(dir, cluster.StateFile))
		fmt.Fprintln(stdout, "no cluster is running (its supervisor is gone)")
		return nil
	}
	fmt.Fprintf(stdout, "stopping the cluster (supervisor pid %d)\n", s.Supervisor)
	if err := syscall.Kill(s.Supervisor, syscall.SIGTERM); err != nil {
		return err
	}
	for deadline := time.Now().Add(3 * time.Minute); alive(s.Supervisor); {
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster's supervisor (pid %d) did not stop in 3 minutes; its log: %s", s.Supervisor, filepath.Join(dir, "cluster.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintln(stdout, "cluster stopped")
	return nil
}

// alive says whether process pid runs.
func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// runNATSNode runs one node of the cluster's NATS until SIGTERM or SIGINT.
func runNATSNode(ctx context.Context, args []string, log *slog.Logger) error {
	fset := flag.NewFlagSet("cluster nats-node", flag.ContinueOnError)
	var cfg cluster.NodeConfig
	fset.StringVar(&cfg.Name, "name", "", "server name")
	fset.IntVar(&cfg.Port, "port", 0, "client port")
	fset.IntVar(&cfg.ClusterPort, "cluster-port", 0, "route port")
	fset.StringVar(&cfg.StoreDir, "store", "", "JetStream store directory")
	fset.Func("route", "another node's route URL (repeatable)", func(v string) error {
		cfg.Routes = append(cfg.Routes, v)
		return nil
	})
	if err := fset.Parse(args); err != nil {
		return err
	}
	if cfg.Name == "" || cfg.Port == 0 || cfg.ClusterPort == 0 || cfg.StoreDir == "" {
		return errors.New("cluster nats-node needs -name, -port, -cluster-port and -store")
	}
	s, err := cluster.StartNode(cfg)
	if err != nil {
		return err
	}
	log.Info("NATS node up", "name", cfg.Name, "url", s.ClientURL(), "routes", strings.Join(cfg.Routes, ","))
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// runChaos runs the chaos run on a fresh cluster under DATA_DIR/chaos and
// prints its report; with -out it writes the results there, with -readme
// it shows the figures between the chaos markers of that Markdown file. A
// broken guarantee fails it.
func runChaos(ctx context.Context, dataDir string, args []string, stdout io.Writer) error {
	fset := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	short := fset.Bool("short", false, "shorter pauses between the kills (the run in make test)")
	out := fset.String("out", "", "write results.md and results.json into this directory")
	readme := fset.String("readme", "", "show the figures in this Markdown file, between <!-- chaos:begin --> and <!-- chaos:end -->")
	binary := binaryFlag(fset)
	if err := fset.Parse(args); err != nil || fset.NArg() != 0 {
		return errUsage
	}
	server, err := serverBinary(*binary)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(filepath.Join(dataDir, "chaos"))
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	report, err := chaos.Run(ctx, chaos.Options{Binary: server, Lab: self, Dir: dir, Short: *short, Progress: stdout})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s\n", report.Markdown())
	if *out != "" {
		if err := report.Write(*out); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", *out)
	}
	if *readme != "" {
		if err := report.UpdateReadme(*readme); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote the chaos figures into %s\n", *readme)
	}
	if len(report.Problems) > 0 {
		return fmt.Errorf("the chaos run found %d problem(s)", len(report.Problems))
	}
	return nil
}

// runDoor runs `door`: the attacks of the rows asked for (all by default)
// on a PostgreSQL of its own under DATA_DIR/door, printed as a table.
func runDoor(ctx context.Context, dataDir string, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("door", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	rowList := fset.String("rows", "", "comma-separated rows of the threat model to attack (default: all)")
	binary := binaryFlag(fset)
	if err := fset.Parse(args); err != nil || fset.NArg() != 0 {
		return errUsage
	}
	rows := map[int]bool{}
	for r := range strings.SplitSeq(*rowList, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		n, err := strconv.Atoi(r)
		if err != nil {
			return errUsage
		}
		rows[n] = true
	}
	server, err := serverBinary(*binary)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(filepath.Join(dataDir, "door"))
	if err != nil {
		return err
	}
	// Its cluster too, where localpg keeps it (under the temp dir when
	// PostgreSQL's user cannot reach dir).
	pgDir := filepath.Join(dir, "postgres")
	if err := localpg.Remove(ctx, pgDir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pg, err := localpg.Start(ctx, localpg.Options{Dir: pgDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer func() { _ = pg.Stop(context.WithoutCancel(ctx)) }()
	findings, err := door.Run(ctx, door.Config{Binary: server, AdminDB: pg.URL, DataDir: dir, Rows: rows,
		Logf: func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }})
	fmt.Fprintf(stdout, "%s\n", door.Markdown(findings))
	return err
}
