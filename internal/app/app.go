// Package app wires a chargeonce server: the configuration read from the
// environment (LoadConfig), the card provider it names (NewProvider), what
// a server is made of (New: the database, metrics, merchants, payments,
// live status, events and webhooks, and in development the simulated
// provider), its background loops (App.StartLoops), its HTTP API (Handler)
// and its logger. The command in server.go runs one around real listeners;
// the operator commands (internal/cli) open the parts they need; tests
// build one per test and serve it in process.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"chargeonce/cardsim"
	"chargeonce/db"
	"chargeonce/db/localpg"
	"chargeonce/events"
	"chargeonce/graph"
	"chargeonce/history"
	"chargeonce/live"
	"chargeonce/loop"
	"chargeonce/merchant"
	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/webhook"
)

// App is what a chargeonce server is made of: its database, its metrics,
// the merchants and the payment service, and in development the simulated
// card provider.
type App struct {
	cfg       Config
	log       *slog.Logger
	pool      *pgxpool.Pool
	registry  *prometheus.Registry
	metrics   *metrics.Metrics
	merchants *merchant.Service
	payments  *payment.Service
	// live tells chargeUpdated subscribers when an attempt changes.
	live *live.Hub
	// notifier tells the relay and the live status of committed events;
	// relay publishes the outbox.
	notifier *events.Notifier
	relay    *events.Relay
	// streams are the websockets and event streams that carry them.
	streams *graph.Streams
	// simulator is the simulated card provider's API under /provider/, in
	// development only.
	simulator http.Handler
	// broker carries the outbox's events (NATS with JetStream).
	broker *events.Broker
	// webhooks delivers the events to the merchants' endpoints.
	webhooks *webhook.Service
	// stripeWebhook hears Stripe's events, when PROVIDER=stripe.
	stripeWebhook http.Handler
	// demo is the demo merchant, in development only.
	demo payment.Merchant
	// history writes the history rows that ride in no write of the
	// ledger's (history.Recorder).
	history *history.Recorder
	closeDB func()
	// passes are the background loops' test signals.
	passes *Passes
}

// Passes are the test signals of the background loops that StartLoops
// runs on loop.Runner: each is told of every pass its loop finishes, with
// the pass's Result, so that a test waits for "two reconciler passes" and
// then asserts what they did or left alone, instead of sleeping. A server
// has them too, at the cost of a lock per pass; they keep nothing unless a
// test waits. (The sweep of expired checkout sessions is part of the
// retention pass; abandoned authentications are the reconciler's.)
type Passes struct {
	Reconcile        *loop.Passes // Result: payment.ReconcileResult
	Retention        *loop.Passes // Result: payment.RetentionResult
	Relay            *loop.Passes // Result: the events sent (int)
	Webhooks         *loop.Passes // Result: the deliveries the worker started sending (int)
	WebhookRetention *loop.Passes // Result: the finished deliveries forgotten (int)
	StreamRecheck    *loop.Passes // Result: graph.Rechecked
}

// Passes are a's background loops' test signals.
func (a *App) Passes() *Passes { return a.passes }

// New opens the database (applying migrations) and builds the app. Its
// payment service charges through the provider that cfg names: Stripe, or
// the simulator's API at providerURL, which in development the caller
// serves there (Simulator). providerTransport carries the provider's
// requests (nil: the network).
func New(ctx context.Context, cfg Config, log *slog.Logger, providerURL string, providerTransport http.RoundTripper) (*App, error) {
	pool, closeDB, err := OpenDatabase(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log, pool: pool, closeDB: closeDB, registry: prometheus.NewRegistry(), passes: &Passes{
		Reconcile: &loop.Passes{}, Retention: &loop.Passes{}, Relay: &loop.Passes{},
		Webhooks: &loop.Passes{}, WebhookRetention: &loop.Passes{}, StreamRecheck: &loop.Passes{},
	}}
	logHostNames(cfg, log)
	a.metrics = metrics.New(a.registry)
	a.metrics.WatchPool(pool)
	a.merchants = merchant.NewWithConfig(pool, !cfg.Production, merchant.Config{Logger: log, Metrics: a.metrics, Production: cfg.Production})
	if !cfg.Production {
		// The simulator's schema exists only where it is mounted: never in
		// production.
		if err := cardsim.Migrate(ctx, pool); err != nil {
			closeDB()
			return nil, err
		}
		a.simulator = http.StripPrefix("/provider", cardsim.NewHandler(pool, cardsim.Config{
			SlowDelay: cfg.SlowDelay, AuthorizationWindow: cfg.SimAuthorizationWindow, PublicURL: cfg.SimPublicURL, Logger: log,
		}))
		if a.demo, err = a.merchants.EnsureDevelopmentKey(ctx, "demo", cfg.DemoAPIKey, merchant.KeySecret); err != nil {
			closeDB()
			return nil, fmt.Errorf("create demo merchant with DEMO_API_KEY: %w", err)
		}
		if _, err := a.merchants.EnsureDevelopmentKey(ctx, "demo", cfg.DemoPublishableKey, merchant.KeyPublishable); err != nil {
			closeDB()
			return nil, fmt.Errorf("create the demo merchant's DEMO_PUBLISHABLE_KEY: %w", err)
		}
	}
	// The relay and the live status hear of committed events from the
	// notifier, in process here and by one coalesced NOTIFY elsewhere.
	a.notifier = events.NewNotifier(pool, log)
	a.history = history.NewRecorder(pool, history.Config{Instance: cfg.Instance, FlushInterval: cfg.HistoryFlushInterval,
		CountInterval: cfg.HistoryCountInterval, Logger: log})
	a.payments = NewPaymentService(cfg, pool, NewProvider(cfg, providerURL, providerTransport, log), log, a.metrics, a.notifier.Committed, a.history)
	a.stripeWebhook = newStripeWebhook(cfg, a.payments, log, a.metrics)
	if a.broker, err = OpenBroker(ctx, cfg, log); err != nil {
		closeDB()
		return nil, err
	}
	// The relay owns the stream; making it now spares the consumers a first
	// pass that finds none. A broker that is away is no reason not to start:
	// the relay makes the stream when it is back.
	streamCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := events.EnsureStream(streamCtx, a.broker.JS, cfg.NATSReplicas); err != nil {
		log.Warn("event stream not made yet; the relay makes it once the broker answers", "err", err)
	}
	cancel()
	wc := cfg.WebhookConfig(a.metrics)
	wc.WorkerPasses, wc.RetentionPasses = a.passes.Webhooks, a.passes.WebhookRetention
	wc.Instance = cfg.Instance
	if a.webhooks, err = webhook.New(pool, a.broker.JS, log, wc); err != nil {
		a.Close()
		return nil, err
	}
	a.metrics.WatchOutbox(func(ctx context.Context) (int, error) { return events.CountUnsent(ctx, pool) })
	a.live = live.NewHub(pool, a.payments, live.Config{PollInterval: cfg.LivePollInterval, MaxWatchersPerAttempt: int(cfg.LiveMaxWatchersPerAttempt),
		Logger: log, Metrics: a.metrics, Self: a.notifier.ID})
	a.notifier.OnCommit(a.live.Poke)
	a.relay = events.NewRelay(a.pool, a.broker.JS, events.RelayConfig{
		Replicas: cfg.NATSReplicas, Logger: log, Fault: cfg.Fault,
		Published: func(dup bool) { a.metrics.EventsPublished.WithLabelValues(strconv.FormatBool(dup)).Inc() },
		Passes:    a.passes.Relay,
	})
	a.notifier.OnCommit(func(db.NoticedAttempt) { a.relay.Wake() })
	// The open streams are checked again at every change of keys, merchants
	// or origins, as soon as this server hears of it.
	sc := cfg.StreamsConfig(log, a.metrics)
	sc.RecheckPasses = a.passes.StreamRecheck
	a.streams = graph.NewStreams(sc)
	a.merchants.OnChange(a.streams.Changed)
	a.metrics.WatchStuck(a.payments.CountStuck)
	a.metrics.WatchWaiting(a.payments.CountWaiting)
	return a, nil
}

// Close closes the database, and stops the project-local PostgreSQL if the
// app started it.
func (a *App) Close() {
	a.broker.Close()
	a.closeDB()
}

// StartLoops runs the background loops (the reconciler, the retention
// cleaner, the relay, the webhooks, the live status listener, the API
// key cache's listener and the re-check of open streams) until stop is called; stop ends the subscriptions
// left and waits for them all.
func (a *App) StartLoops() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Go(func() { a.live.Run(ctx) })
	loops.Go(func() { a.merchants.Run(ctx) })
	loops.Go(func() { a.streams.Run(ctx) })
	loops.Go(func() {
		payment.NewReconciler(a.payments, payment.ReconcilerConfig{Passes: a.passes.Reconcile}).Run(ctx)
	})
	loops.Go(func() { a.notifier.Run(ctx) })
	loops.Go(func() { a.relay.Run(ctx) })
	loops.Go(func() { a.webhooks.Run(ctx) })
	loops.Go(func() {
		payment.NewCleaner(a.payments, payment.CleanerConfig{Interval: a.cfg.CleanupInterval, Passes: a.passes.Retention}).Run(ctx)
	})
	// The history's recorder stops last, so that its last write holds what
	// the other loops noted on their way out.
	historyCtx, stopHistory := context.WithCancel(context.Background())
	historyDone := make(chan struct{})
	go func() { defer close(historyDone); a.history.Run(historyCtx) }()
	return sync.OnceFunc(func() { a.CloseStreams(); cancel(); loops.Wait(); stopHistory(); <-historyDone })
}

// CloseStreams ends the subscriptions: their websockets and event streams
// first, so that they end at once, then their watchers. A server calls it
// when it starts to shut down, since subscriptions would last as long as
// their clients (who subscribe again elsewhere, or poll).
func (a *App) CloseStreams() {
	a.streams.Close()
	a.live.Close()
}

// NewPaymentService builds the payment service of cfg on pool, charging
// through provider;
// committed is told of the events each transaction commits
// (payment.Config.EventsCommitted); nil where nothing waits for them.
func NewPaymentService(cfg Config, pool *pgxpool.Pool, provider payment.Provider, log *slog.Logger, m *metrics.Metrics,
	committed func([]payment.Event), hist *history.Recorder) *payment.Service {
	pc := cfg.PaymentConfig()
	pc.History = hist
	pc.Logger = log
	pc.Metrics = m
	pc.EventsCommitted = committed
	return payment.NewService(pool, provider, pc)
}

// OpenBroker connects to the event broker at NATS_URL, or in development to
// the embedded one under DATA_DIR/nats, which it starts unless another local
// chargeonce process runs it.
func OpenBroker(ctx context.Context, cfg Config, log *slog.Logger) (*events.Broker, error) {
	dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "nats"))
	if err != nil {
		return nil, err
	}
	return events.Open(ctx, events.BrokerConfig{URL: cfg.NATSURL, StoreDir: dir, Port: cfg.NATSPort, Name: "chargeonce", Logger: log})
}

// Simulator is the simulated card provider's API, in development; nil in
// production. The server serves it on a loopback listener of its own, which
// the app's provider client reaches over HTTP like any provider.
func (a *App) Simulator() http.Handler { return a.simulator }

// OpenDatabase connects to DATABASE_URL, or in development to a project-local
// PostgreSQL under DATA_DIR that it starts, and applies migrations.
func OpenDatabase(ctx context.Context, cfg Config, log *slog.Logger) (*pgxpool.Pool, func(), error) {
	url := cfg.DatabaseURL
	stopLocal := func() {}
	if url == "" {
		dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "postgres"))
		if err != nil {
			return nil, nil, err
		}
		log.Info("DATABASE_URL is not set: using the project-local PostgreSQL", "dir", dir)
		local, err := localpg.Start(ctx, localpg.Options{Dir: dir, Logger: log})
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
	if warning, err := db.DurabilityWarning(ctx, pool); err != nil {
		log.Warn("could not check how commits are replicated", "err", err)
	} else if warning != "" {
		log.Warn(warning)
	}
	return pool, func() { pool.Close(); stopLocal() }, nil
}
