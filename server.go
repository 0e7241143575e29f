// Command chargeonce is a GraphQL API that charges cards at most once per
// idempotency key. `chargeonce serve` serves it; the other commands are the
// operator's (API keys, webhook endpoints, stuck attempts, a reconciler
// pass, the event consumers, the project-local PostgreSQL: internal/cli),
// and `chargeonce` with no command, or one it does not know, prints them
// all.
//
// This file runs the process: signals, configuration, listeners, and the
// graceful shutdown. What a server is made of, and its HTTP API, are
// internal/app's.
package main

import (
	"context"
	"errors"
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

	"chargeonce/graph"
	"chargeonce/internal/app"
	"chargeonce/internal/cli"
	"chargeonce/internal/foreground"
	"chargeonce/internal/listening"
	"chargeonce/tracing"
)

func main() {
	err := run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, cli.ErrUsage):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "chargeonce:", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds how long in-flight requests may take to finish once
// the server is told to stop. A charge in flight may wait for the provider.
const shutdownTimeout = 30 * time.Second

// run runs the command of args (args[0] is the binary's name): the server
// (serve) until ctx ends or a SIGINT or SIGTERM comes, or an operator
// command. No command, or one it does not know, is cli.ErrUsage; help
// prints the usage.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch {
	case len(args) < 2:
		return cli.ErrUsage
	case len(args) == 2 && (args[1] == "help" || args[1] == "-h" || args[1] == "--help"):
		fmt.Fprintln(stdout, cli.ErrUsage)
		return nil
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := app.LoadConfig(getenv)
	if err != nil {
		return err
	}
	log := app.NewLogger(cfg, stderr)
	if len(args) == 2 && args[1] == "serve" {
		// Under make run, a Ctrl-C is the server's alone (see foreground).
		defer foreground.Take()()
		// Off unless OTEL_* names an endpoint (docs/operators.md#tracing).
		shutdownTracing, err := tracing.Setup(ctx, getenv, cfg.Instance, "")
		if err != nil {
			return err
		}
		defer func() {
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := shutdownTracing(flushCtx); err != nil {
				log.Warn("tracing: the last spans were not exported", "err", err)
			}
		}()
		return serve(ctx, cfg, log)
	}
	return cli.Run(ctx, cfg, args[1:], stdout, log)
}

// serve serves the API on HOST:PORT (and the metrics on METRICS_ADDR)
// until ctx ends, then finishes the requests in flight.
func serve(ctx context.Context, cfg app.Config, log *slog.Logger) error {
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
	if cfg.SimPublicURL == "" {
		// The simulator's authentication page is where a shopper's browser
		// goes: this server's own address, not the private listener below.
		cfg.SimPublicURL = "http://" + browsable(ln.Addr()) + "/provider"
	}
	providerURL := cfg.ProviderURL
	var simLn net.Listener
	if providerURL == "" && cfg.Provider == app.ProviderCardsim {
		// chargeonce reaches the simulator over HTTP like any provider, on a
		// loopback listener of its own that closes only after the API has
		// drained, so a charge in flight at shutdown still reaches it.
		if simLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return fmt.Errorf("listen for the simulated provider: %w", err)
		}
		defer simLn.Close()
		providerURL = "http://" + simLn.Addr().String() + "/provider"
	}

	a, err := app.New(ctx, cfg, log, providerURL, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	serveErr := make(chan error, 2)
	if simLn != nil {
		simSrv := &http.Server{Handler: a.Simulator(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = simSrv.Serve(simLn) }()
		defer simSrv.Shutdown(context.WithoutCancel(ctx))
	}
	srv := &http.Server{
		Handler:           app.Handler(a),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A GET's document is in its URL: as large as a body, no larger.
		MaxHeaderBytes: graph.MaxHeaderBytes(cfg.MaxBodyBytes),
		// A charge may wait for the provider, with inline retries.
		WriteTimeout: 2 * time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() { serveErr <- srv.Serve(ln) }()
	addrs := listening.Addrs{API: "http://" + ln.Addr().String()}
	if metricsLn != nil {
		// Metrics on a listener of their own, which operators can keep off
		// the internet, with Go's profiler beside them: how the benchmark's
		// profiles are taken, and how to see where a live instance spends
		// its time.
		metricsSrv := &http.Server{Handler: metricsMux(a), ReadHeaderTimeout: 5 * time.Second,
			MaxHeaderBytes: graph.MaxHeaderBytes(cfg.MaxBodyBytes),
			ReadTimeout:    10 * time.Second, WriteTimeout: maxProfileTime + 10*time.Second}
		go func() { serveErr <- metricsSrv.Serve(metricsLn) }()
		defer metricsSrv.Close()
		addrs.Metrics = "http://" + metricsLn.Addr().String() + "/metrics"
	}
	// The background loops run until the HTTP server has drained, so that
	// in-flight charges finish first.
	stopLoops := a.StartLoops()
	defer stopLoops()
	listening.Announce(log, addrs, "production", cfg.Production, "provider", app.ProviderName(cfg, providerURL))
	if !cfg.Production {
		// What a newcomer opens first: the demo checkout and the playground.
		base := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
		log.Info("try it", "demo", base+"/", "playground", base+"/playground")
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
	a.CloseStreams()
	err = srv.Shutdown(shutdownCtx)
	stopLoops()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// metricsMux serves the metrics and Go's profiler.
func metricsMux(a *app.App) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.MetricsHandler())
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// maxProfileTime is the longest CPU profile or trace the metrics listener
// can serve (?seconds=N): its write timeout must outlast the recording.
const maxProfileTime = time.Minute

// browsable is addr as a browser on this machine reaches it: a listener on
// every interface is reached on loopback.
func browsable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
