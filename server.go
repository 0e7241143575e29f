// Command chargeonce is a GraphQL API that charges cards at most once per
// idempotency key. `chargeonce` serves; the other commands (apikey, charges
// stuck, reconcile --once, localdb stop) are for operators; see errUsage.
//
// server.go runs the process (signals, listeners, graceful shutdown); app.go
// builds what a server is made of; routes.go is its HTTP API, which tests
// serve in process; commands.go holds the operator commands.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"chargeonce/internal/listening"
)

func main() {
	if err := run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "chargeonce:", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds how long in-flight requests may take to finish once
// the server is told to stop. A charge in flight may wait for the provider.
const shutdownTimeout = 30 * time.Second

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	if len(args) > 1 {
		return runCommand(ctx, cfg, args[1:], stdout, log)
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, cfg.Port))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("listen for metrics on METRICS_ADDR: %w", err)
		}
		defer metricsLn.Close()
	}
	providerURL := cfg.ProviderURL
	var simLn net.Listener
	if providerURL == "" && cfg.Provider == providerCardsim {
		// chargeonce reaches the simulator over HTTP like any provider, on a
		// loopback listener of its own that closes only after the API has
		// drained, so a charge in flight at shutdown still reaches it.
		if simLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return fmt.Errorf("listen for the simulated provider: %w", err)
		}
		defer simLn.Close()
		providerURL = "http://" + simLn.Addr().String() + "/provider"
	}

	a, err := newApp(ctx, cfg, log, providerURL, nil)
	if err != nil {
		return err
	}
	defer a.close()
	serveErr := make(chan error, 2)
	if simLn != nil {
		simSrv := &http.Server{Handler: a.simulator, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = simSrv.Serve(simLn) }()
		defer simSrv.Shutdown(context.WithoutCancel(ctx))
	}
	srv := &http.Server{
		Handler:           newHandler(a),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A charge may wait for the provider, with inline retries.
		WriteTimeout: 2 * time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() { serveErr <- srv.Serve(ln) }()
	if metricsLn != nil {
		// Metrics on a listener of their own, which operators can keep off
		// the internet, with Go's profiler beside them: how the benchmark's
		// profiles are taken, and how to see where a live instance spends
		// its time.
		metricsMux := http.NewServeMux()
		metricsMux.Handle("GET /metrics", a.metricsHandler())
		metricsMux.HandleFunc("GET /debug/pprof/", pprof.Index)
		metricsMux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		metricsMux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		metricsMux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		metricsMux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		metricsSrv := &http.Server{Handler: metricsMux, ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 10 * time.Second, WriteTimeout: maxProfileTime + 10*time.Second}
		go func() { serveErr <- metricsSrv.Serve(metricsLn) }()
		defer metricsSrv.Close()
	}
	// The background loops run until the HTTP server has drained, so that
	// in-flight charges finish first.
	stopLoops := a.startLoops()
	defer stopLoops()
	addr := ln.Addr().(*net.TCPAddr)
	addrs := listening.Addrs{API: "http://" + addr.String()}
	if metricsLn != nil {
		addrs.Metrics = "http://" + metricsLn.Addr().String() + "/metrics"
	}
	listening.Announce(log, addrs, "production", cfg.Production, "provider", providerName(cfg, providerURL))
	if !cfg.Production {
		log.Info("try it", "playground", fmt.Sprintf("http://localhost:%d/playground", addr.Port))
	}

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests", "timeout", shutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	// Subscriptions would last as long as their clients: close them first,
	// or Shutdown would wait for them.
	a.closeStreams()
	err = srv.Shutdown(shutdownCtx)
	stopLoops()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// maxProfileTime is the longest CPU profile or trace the metrics listener
// can serve (?seconds=N): its write timeout must outlast the recording.
const maxProfileTime = time.Minute
