// Command chargeonce is a GraphQL API that charges cards at most once per
// idempotency key. `chargeonce` serves; the other commands (apikey create,
// charges stuck, reconcile --once, localdb stop) are for operators; see
// errUsage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"chargeonce/db"
	"chargeonce/devfault"
	"chargeonce/graph"
	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/payment/cardsim"
	"chargeonce/ratelimit"
	webdemo "chargeonce/web-demo"
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

// providerTimeout bounds one call to the card provider.
const providerTimeout = 10 * time.Second

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

	pool, closeDB, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()

	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.WatchPool(pool)

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, cfg.Port))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			ln.Close()
			return fmt.Errorf("listen for metrics on METRICS_ADDR: %w", err)
		}
	}
	var simulator http.Handler
	if !cfg.Production {
		simulator = http.StripPrefix("/provider", cardsim.NewHandler(pool, cardsim.Config{SlowDelay: cfg.SlowDelay, Logger: log}))
	}
	providerURL := cfg.ProviderURL
	if providerURL == "" {
		// chargeonce reaches the simulator over HTTP like any provider, on a
		// loopback listener of its own that closes only after the API has
		// drained, so a charge in flight at shutdown still reaches it.
		simLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen for the simulated provider: %w", err)
		}
		simSrv := &http.Server{Handler: simulator, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = simSrv.Serve(simLn) }()
		defer simSrv.Shutdown(context.WithoutCancel(ctx))
		providerURL = "http://" + simLn.Addr().String() + "/provider"
	}

	merchants := payment.NewMerchants(pool, !cfg.Production)
	if !cfg.Production {
		if _, err := merchants.EnsureDevelopmentKey(ctx, "demo", cfg.DemoAPIKey); err != nil {
			return fmt.Errorf("create demo merchant with DEMO_API_KEY: %w", err)
		}
	}
	payments := newPaymentService(cfg, pool, providerURL, log, m)
	m.WatchStuck(func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return payments.CountStuck(ctx)
	})
	resolver := &graph.Resolver{Payments: payments, Merchants: merchants}

	mux := http.NewServeMux()
	api := graph.NewHandler(resolver, graph.HandlerConfig{
		Production:           cfg.Production,
		MaxBodyBytes:         cfg.MaxBodyBytes,
		MaxChargesPerRequest: int(cfg.MaxChargesPerRequest),
		MerchantLimit:        ratelimit.New(cfg.RateLimitMerchant, int(cfg.RateLimitMerchantBurst), 0),
		IPLimit:              ratelimit.New(cfg.RateLimitIP, int(cfg.RateLimitIPBurst), 0),
		AuthTimeout:          cfg.DBTimeout,
		Logger:               log,
		Metrics:              m,
	})
	if !cfg.Production {
		// The web demo's "lose the next response" switch: never in production.
		api = devfault.Inject(api, log)
	}
	mux.Handle("/graphql", api)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", readyz(pool))
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	if !cfg.Production {
		mux.Handle("GET /metrics", metricsHandler)
		mux.Handle("GET /playground", webdemo.Playground("/graphql", cfg.DemoAPIKey))
		mux.Handle("/provider/", simulator)
		mux.Handle("/", webdemo.Handler())
	}

	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A charge may wait for the provider, with inline retries.
		WriteTimeout: 2 * time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(ln) }()
	if metricsLn != nil {
		// Metrics on a listener of their own, which operators can keep off the internet.
		metricsMux := http.NewServeMux()
		metricsMux.Handle("GET /metrics", metricsHandler)
		metricsSrv := &http.Server{Handler: metricsMux, ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
		go func() { serveErr <- metricsSrv.Serve(metricsLn) }()
		defer metricsSrv.Close()
		log.Info("metrics listening", "addr", "http://"+metricsLn.Addr().String()+"/metrics")
	}
	// The background loops run until the HTTP server has drained, so that
	// in-flight charges finish first.
	loopsCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	var loops sync.WaitGroup
	loops.Go(func() {
		payment.NewReconciler(payments, payment.ReconcilerConfig{}).Run(loopsCtx)
	})
	loops.Go(func() {
		payment.NewCleaner(payments, payment.CleanerConfig{Interval: cfg.CleanupInterval}).Run(loopsCtx)
	})
	defer func() { stopLoops(); loops.Wait() }()
	log.Info("chargeonce listening", "addr", "http://"+addr.String(),
		"production", cfg.Production, "provider", providerURL)
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
	err = srv.Shutdown(shutdownCtx)
	stopLoops()
	loops.Wait()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// newPaymentService builds the payment service on pool, charging through the
// provider at providerURL.
func newPaymentService(cfg config, pool *pgxpool.Pool, providerURL string, log *slog.Logger, m *metrics.Metrics) *payment.Service {
	pc := cfg.paymentConfig()
	pc.Logger = log
	pc.Metrics = m
	return payment.NewService(pool, payment.NewHTTPProvider(providerURL, providerTimeout), pc)
}

// openDatabase connects to DATABASE_URL, or in development to a project-local
// PostgreSQL under DATA_DIR that it starts, and applies migrations.
func openDatabase(ctx context.Context, cfg config, log *slog.Logger) (*pgxpool.Pool, func(), error) {
	url := cfg.DatabaseURL
	stopLocal := func() {}
	if url == "" {
		dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "postgres"))
		if err != nil {
			return nil, nil, err
		}
		log.Info("DATABASE_URL is not set: using the project-local PostgreSQL", "dir", dir)
		local, err := db.StartLocal(ctx, db.LocalOptions{Dir: dir, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("start local PostgreSQL (or set DATABASE_URL): %w", err)
		}
		url = local.URL
		if local.Started {
			// Stop what we started; leave a server someone else started alone.
			stopLocal = func() {
				if err := local.Stop(context.Background()); err != nil {
					log.Warn("stop local PostgreSQL", "err", err)
				}
			}
		}
	}
	pool, err := db.Connect(ctx, url)
	if err != nil {
		stopLocal()
		return nil, nil, err
	}
	if err := db.Migrate(ctx, pool); err != nil {
		pool.Close()
		stopLocal()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); stopLocal() }, nil
}

func readyz(pool *pgxpool.Pool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := pool.Ping(ctx); err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}

var errUsage = errors.New(`usage:
  chargeonce                          serve (configuration from the environment; see README.md)
  chargeonce apikey create NAME       create merchant NAME if needed and print a new API key for it
  chargeonce apikey rotate NAME       print a new API key for merchant NAME; its other keys stay valid until revoked
  chargeonce apikey list              list every merchant's API keys (id, prefix, created, revoked; never the key)
  chargeonce apikey revoke PREFIX|ID  revoke one API key, by its id or the prefix of exactly one live key
  chargeonce charges stuck            list PROCESSING attempts whose lease has expired
  chargeonce reconcile --once         run one reconciler pass now (needs PROVIDER_URL or a running server's simulator)
  chargeonce localdb stop [DIR]       stop the project-local PostgreSQL in DIR (default DATA_DIR/postgres)`)
