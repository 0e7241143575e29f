package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"chargeonce/chaos"
	"chargeonce/cluster"
	"chargeonce/events"
)

// clusterDir is where chargeonce cluster keeps its cluster.
func clusterDir(cfg config) (string, error) {
	return filepath.Abs(filepath.Join(cfg.DataDir, "cluster"))
}

// runClusterCommand runs `cluster up|down`, and the parts that up starts:
// `cluster supervise` (the process that owns the cluster) and `cluster
// nats-node` (one NATS node).
func runClusterCommand(ctx context.Context, cfg config, args []string, stdout io.Writer, log *slog.Logger) error {
	if len(args) == 0 {
		return errUsage
	}
	if args[0] == "nats-node" {
		return runNATSNode(ctx, args[1:], log)
	}
	fset := flag.NewFlagSet("cluster "+args[0], flag.ContinueOnError)
	port := fset.Int("port", cluster.DefaultPorts.Instance, "the first instance's port, the others' next to it; 0 picks free ports for every part")
	if err := fset.Parse(args[1:]); err != nil || fset.NArg() != 0 {
		return errUsage
	}
	ports := cluster.DefaultPorts
	ports.Instance = *port
	if *port == 0 {
		ports = cluster.Ports{}
	}
	dir, err := clusterDir(cfg)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return clusterUp(ctx, dir, *port, stdout)
	case "down":
		return clusterDown(ctx, dir, stdout)
	case "supervise":
		return clusterSupervise(ctx, dir, ports, log)
	default:
		return errUsage
	}
}

// clusterUp starts the supervisor in the background, waits until it says
// the cluster is up, and prints the summary.
func clusterUp(ctx context.Context, dir string, port int, stdout io.Writer) error {
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
	cmd := exec.Command(self, "cluster", "supervise", "-port", strconv.Itoa(port))
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
func clusterSupervise(ctx context.Context, dir string, ports cluster.Ports, log *slog.Logger) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c, err := cluster.Up(ctx, cluster.Options{Dir: dir, Binary: self, Ports: ports, Logger: log})
	if err != nil {
		return err
	}
	state := c.State(ctx, os.Getpid())
	if err := state.Write(); err != nil {
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
	var cfg events.NodeConfig
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
	s, err := events.StartNode(cfg)
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
// prints its report. A full run writes chaos/results/ and the README's
// figures; -short (the version in make test) only prints. A broken
// guarantee fails it.
func runChaos(ctx context.Context, cfg config, args []string, stdout io.Writer) error {
	fset := flag.NewFlagSet("chaos", flag.ContinueOnError)
	short := fset.Bool("short", false, "shorter pauses between the kills; write no results")
	if err := fset.Parse(args); err != nil {
		return err
	}
	dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "chaos"))
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	report, err := chaos.Run(ctx, chaos.Options{Binary: self, Dir: dir, Short: *short, Progress: stdout})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s\n", report.Markdown())
	if !*short {
		if err := report.Write(filepath.Join("chaos", "results")); err != nil {
			return err
		}
		if err := report.UpdateReadme("README.md"); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "\nwrote chaos/results/ and the README's chaos figures")
	}
	if len(report.Problems) > 0 {
		return fmt.Errorf("the chaos run found %d problem(s)", len(report.Problems))
	}
	return nil
}
