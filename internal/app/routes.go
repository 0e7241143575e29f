package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"chargeonce/cardtesting"
	"chargeonce/devfault"
	"chargeonce/graph"
	"chargeonce/ratelimit"
	"chargeonce/tracing"
	webdemo "chargeonce/web-demo"
)

// Handler is the server's HTTP API: /graphql, the health and readiness
// probes, Stripe's webhook endpoint when PROVIDER=stripe, and in
// development the metrics, the playground, the simulated provider and the
// demo checkout. It answers only for the server's own host names (host.go).
// It needs no listener: tests serve it in process.
func Handler(a *App) http.Handler {
	cfg := a.cfg
	mux := http.NewServeMux()
	api := graph.NewHandler(&graph.Resolver{
		Payments: a.payments, Merchants: a.merchants, Live: a.live, Declines: a.cardTestingGuard(),
	}, graph.HandlerConfig{
		Production:           cfg.Production,
		MaxBodyBytes:         cfg.MaxBodyBytes,
		MaxChargesPerRequest: int(cfg.MaxChargesPerRequest),
		MerchantLimit:        ratelimit.New(cfg.RateLimitMerchant, int(cfg.RateLimitMerchantBurst), 0),
		IPLimit:              ratelimit.New(cfg.RateLimitIP, int(cfg.RateLimitIPBurst), 0),
		PublishableLimit:     ratelimit.New(cfg.RateLimitPublishable, int(cfg.RateLimitPublishableBurst), 0),
		PublishableIPLimit:   ratelimit.New(cfg.RateLimitPublishableIP, int(cfg.RateLimitPublishableIPBurst), 0),
		AuthTimeout:          cfg.DBTimeout,
		Streams:              a.streams,
		Logger:               a.log,
		Metrics:              a.metrics,
	})
	if !cfg.Production {
		// The web demo's "lose the next response" switch: never in production.
		api = devfault.Inject(api, a.log)
	}
	// Traced outermost, so that every answer (a refusal at the door too)
	// carries its trace's id.
	mux.Handle("/graphql", tracing.Handler("/graphql", api))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", a.readyz)
	if a.stripeWebhook != nil {
		mux.Handle("POST "+StripeWebhookPath, a.stripeWebhook)
	}
	if !cfg.Production {
		mux.Handle("GET /metrics", a.MetricsHandler())
		// GraphiQL, bundled by the web build: it works with no network beyond this server.
		mux.Handle("GET /playground", webdemo.Playground("/graphql", cfg.DemoAPIKey))
		mux.Handle("/provider/", a.simulator)
		mux.Handle("POST /demo/checkout-session", ownPagesOnly(http.HandlerFunc(a.demoCheckoutSession)))
		// The demo's refund loses its answer on request too: the page shows a
		// refund that survives it.
		mux.Handle("POST /demo/refund", ownPagesOnly(devfault.Inject(http.HandlerFunc(a.demoRefund), a.log)))
		// Ship order and Cancel order: a capture and a void, which lose their answers on request too.
		mux.Handle("POST /demo/capture", ownPagesOnly(devfault.Inject(http.HandlerFunc(a.demoCapture), a.log)))
		mux.Handle("POST /demo/void", ownPagesOnly(devfault.Inject(http.HandlerFunc(a.demoVoid), a.log)))
		mux.Handle("/", webdemo.Handler())
	}
	return answerOnlyFor(answeredHosts(cfg), a.log, mux)
}

// cardTestingGuard rations publishable keys' declines per client address,
// and announces a key whose declines run over their allowance with the
// merchant's merchant.card_testing_suspected.
func (a *App) cardTestingGuard() *cardtesting.Guard {
	cfg := a.cfg
	return cardtesting.New(cardtesting.Config{
		AddressRate: cfg.RateLimitDeclinesIP, AddressBurst: int(cfg.RateLimitDeclinesIPBurst),
		KeyRate: cfg.RateLimitDeclinesKey, KeyBurst: int(cfg.RateLimitDeclinesKeyBurst),
		Logger: a.log, Metrics: a.metrics,
		Suspected: func(ctx context.Context, s cardtesting.Suspicion) {
			// Not cut short by the end of the request that raised it; the
			// payment service bounds the write by DB_TIMEOUT.
			ctx = context.WithoutCancel(ctx)
			if err := a.payments.CardTestingSuspected(ctx, s.Merchant, s.KeyID, s.At, s.Until); err != nil {
				a.log.WarnContext(ctx, "could not record the suspicion of card testing as an event", "merchant", s.Merchant.Name, "err", err)
			}
		},
	})
}

// MetricsHandler serves the app's metrics; in the OpenMetrics format to
// a scraper that asks for it, with the latency histograms' exemplars (the
// trace of a slow payment).
func (a *App) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{Registry: a.registry, EnableOpenMetrics: true})
}

// readyz answers 200 while the database answers, 503 otherwise.
func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := a.pool.Ping(ctx); err != nil {
		http.Error(w, "database unreachable", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}
