package app

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"chargeonce/cardsim"
	"chargeonce/cardtesting"
	"chargeonce/events"
	"chargeonce/graph"
	"chargeonce/history"
	"chargeonce/live"
	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/provider/stripe"
	"chargeonce/webhook"
)

// Config is chargeonce's configuration, read from the environment.
type Config struct {
	Host        string // HOST: listen address, default 127.0.0.1 in development, every interface in production
	Port        string // PORT: listen port, default 8080 (0 picks a free one)
	DatabaseURL string // DATABASE_URL: empty starts a project-local PostgreSQL (development only)
	Production  bool   // APP_ENV=production: no demo merchant, no playground, no simulator
	ProviderURL string // PROVIDER_URL: the simulator's base URL when PROVIDER=cardsim; empty uses the in-process simulator
	// SIM_PUBLIC_URL: the in-process simulator's base URL as a shopper's
	// browser reaches it, for its authentication page; default this
	// server's own address plus /provider (server.go sets it once it listens).
	SimPublicURL string
	DemoAPIKey   string // DEMO_API_KEY: the demo merchant's secret key in development, default demo-key
	// DEMO_PUBLISHABLE_KEY: the demo merchant's publishable key in
	// development, default co_pk_demo: what the demo page pays with.
	DemoPublishableKey string
	SlowDelay          time.Duration // SIM_SLOW_DELAY: how long the simulator takes for pm_card_slow, default SimSlowDelayDefault (3s); 0 is no delay
	// SIM_AUTHORIZATION_WINDOW: how long the in-process simulator keeps an
	// authorization (a charge made with manual capture) open, default
	// SimAuthorizationWindowDefault (7 days).
	SimAuthorizationWindow time.Duration
	// INSTANT_DELAY: how long PROVIDER=instant takes to answer a charge,
	// default 0: a slow provider that costs nothing else, for benchmarks.
	InstantDelay time.Duration
	DataDir      string // DATA_DIR: where the project-local PostgreSQL lives, default .data

	// ALLOWED_HOSTS: comma-separated host names (or addresses) the server
	// answers for besides localhost, the loopback addresses and HOST
	// (host.go). Development always checks them; production only when set.
	AllowedHosts []string

	// The card provider (see provider.go): PROVIDER is cardsim (the default,
	// development only) or stripe, with STRIPE_SECRET_KEY (test mode,
	// sk_test_…, unless in production; never printed), STRIPE_API_BASE
	// (default Stripe's own API) and STRIPE_WEBHOOK_SECRET (the signing
	// secret, whsec_…, of the endpoint POST /stripe/webhook; never printed;
	// unset, the endpoint answers 503).
	Provider            string
	StripeSecretKey     secret
	StripeAPIBase       string
	StripeWebhookSecret secret

	Lease             time.Duration // PROCESSING_LEASE: how long a holder owns an attempt, default 30s
	ReconcileInterval time.Duration // RECONCILE_INTERVAL: time between reconciler passes, default 5s
	RedriveWindow     time.Duration // REDRIVE_WINDOW: how long an attempt the provider never saw is re-sent, default 10m
	// AUTHENTICATION_WINDOW: how long an attempt may wait for the shopper to
	// authenticate before it is cancelled as abandoned, default 15m;
	// AUTHENTICATION_CHECK_INTERVAL: how often the reconciler reads the
	// provider about a waiting attempt, default 15s.
	AuthenticationWindow        time.Duration
	AuthenticationCheckInterval time.Duration
	// REFUND_CHECK_INTERVAL: how often the reconciler reads a refund the
	// provider holds pending, default 30s.
	RefundCheckInterval time.Duration
	// LATE_CHARGE_WATCH: how long an attempt failed as provider_unavailable
	// is watched for a charge that completes at the provider later, default 24h.
	LateChargeWatch time.Duration
	// AUTHORIZATION_EXPIRY_WARNING: how long before an open authorization
	// lapses charge.authorization_expiring is written, default 24h.
	AuthorizationExpiryWarning time.Duration
	KeyRetention               time.Duration // KEY_RETENTION: how long a key's stored result is kept, default 24h
	CleanupInterval            time.Duration // CLEANUP_INTERVAL: time between retention passes, default 1m
	DBTimeout                  time.Duration // DB_TIMEOUT: how long a request waits for the database, default 5s
	WebhookRetention           time.Duration // WEBHOOK_RETENTION: how long finished webhook deliveries are kept, default 30 days
	LivePollInterval           time.Duration // LIVE_POLL_INTERVAL: how often a chargeUpdated subscription reads its attempt without a notification, default 5s
	// LIVE_MAX_WATCHERS_PER_ATTEMPT: chargeUpdated subscriptions of one
	// attempt on an instance, default 5.
	LiveMaxWatchersPerAttempt int64
	// The streams (websockets and event streams) of /graphql:
	// STREAM_MAX_PER_ADDRESS and STREAM_MAX_PER_MERCHANT, open at once per
	// client address (default 20) and per merchant (default 1,000) on an
	// instance; STREAM_MAX_SUBSCRIPTIONS, subscriptions at once on one
	// websocket (default 5); STREAM_MAX_LIFETIME, how long a stream lives
	// before the server closes it (default 1h); STREAM_RECHECK_INTERVAL, how
	// often open streams' keys and origins are checked again without a
	// change heard of (default 10s).
	StreamMaxPerAddress    int64
	StreamMaxPerMerchant   int64
	StreamMaxSubscriptions int64
	StreamMaxLifetime      time.Duration
	StreamRecheckInterval  time.Duration

	// WEBHOOK_ALLOW_PRIVATE_NETWORKS: true lets production send webhooks to
	// private networks (RFC 1918, RFC 4193, 100.64/10); default false, only
	// public addresses. Loopback, link-local and metadata addresses stay
	// refused; development allows everything.
	WebhookAllowPrivateNetworks bool

	MaxBodyBytes         int64 // MAX_BODY_BYTES: largest request body, default 64 KiB
	MaxChargesPerRequest int64 // MAX_CHARGES_PER_REQUEST: chargeCard fields one request may run, default 1
	ResultCacheSize      int64 // RESULT_CACHE_SIZE: finished results kept in memory for replays, default 20,000; 0 keeps none
	// RATE_LIMIT_MERCHANT(_BURST): requests a second per merchant, and the
	// burst; RATE_LIMIT_IP(_BURST): unauthenticated requests (and failed
	// authentications) a second per client IP. 0 turns a limit off.
	RateLimitMerchant      float64
	RateLimitMerchantBurst int64
	RateLimitIP            float64
	RateLimitIPBurst       int64
	// RATE_LIMIT_PUBLISHABLE(_BURST): requests a second with a merchant's
	// publishable keys, and the burst; RATE_LIMIT_PUBLISHABLE_IP(_BURST):
	// requests a second with publishable keys from one client address. A
	// budget apart from RATE_LIMIT_MERCHANT, which only secret keys spend.
	RateLimitPublishable        float64
	RateLimitPublishableBurst   int64
	RateLimitPublishableIP      float64
	RateLimitPublishableIPBurst int64
	// RATE_LIMIT_DECLINES_IP(_BURST): declined charges (and client secrets
	// that name no session) a second per client address with publishable
	// keys, and the burst, taken before the provider is called (card
	// testing); RATE_LIMIT_DECLINES_KEY(_BURST): declines a second per
	// publishable key before card testing is suspected, which refuses
	// nobody. 0 turns either off (package cardtesting).
	RateLimitDeclinesKey      float64
	RateLimitDeclinesKeyBurst int64
	RateLimitDeclinesIP       float64
	RateLimitDeclinesIPBurst  int64
	// SESSION_MAX_ATTEMPTS: charge attempts a checkout session takes, default 5.
	SessionMaxAttempts int64
	// RATE_LIMIT_STRIPE_WEBHOOK_IP(_BURST): requests a second to POST
	// /stripe/webhook per client address, and the burst; default
	// stripe.WebhookRateLimitDefault (50) and WebhookRateLimitBurstDefault
	// (200), which Stripe's own traffic never reaches. 0 turns it off.
	RateLimitStripeWebhookIP      float64
	RateLimitStripeWebhookIPBurst int64

	MetricsAddr string // METRICS_ADDR: a separate listener for /metrics; in development /metrics is also on the main port
	LogFormat   string // LOG_FORMAT: json or text, default json in production and text in development
	// LOG_LEVEL: debug, info, warn or error, default info. debug adds a line
	// for every refusal with its reason (never a secret, at any level).
	LogLevel slog.Level
	// CrashAt (CHARGEONCE_CRASH_AT) kills the process with SIGKILL at a
	// dangerous point of a charge or of its event. For crash tests; refused
	// in production.
	CrashAt string
	// Instance (INSTANCE_NAME) names this instance in the history of every
	// key it works on; default the host's name and the process id.
	Instance string
	// HistoryFlushInterval (HISTORY_FLUSH_INTERVAL) is how often the
	// instance writes the history rows that ride in no write of the
	// ledger's (replays, PROCESSING answers, refusals); a process killed
	// outright loses at most that much of them.
	HistoryFlushInterval time.Duration
	// HistoryCountInterval (HISTORY_COUNT_INTERVAL) is how often it adds its
	// counts of replays and PROCESSING answers to their rows.
	HistoryCountInterval time.Duration

	NATSURL      string // NATS_URL: the event broker; empty embeds one (development only)
	NATSPort     int    // EMBEDDED_NATS_PORT: the embedded broker's loopback port, default 4223 (0 picks a free one)
	NATSReplicas int    // NATS_REPLICAS: copies of each event in the CHARGES stream, default 1 (3 on a NATS cluster)
}

// faultPoints are the values CHARGEONCE_CRASH_AT takes: the charge's and
// its event's.
var faultPoints = []string{
	string(payment.FaultAfterClaim), string(payment.FaultAfterProvider), string(payment.FaultAfterFinalize),
	events.FaultAfterPublish, events.FaultAfterReceipt,
}

func LoadConfig(getenv func(string) string) (Config, error) {
	cfg := Config{
		Port:               cmp.Or(getenv("PORT"), PortDefault),
		DatabaseURL:        getenv("DATABASE_URL"),
		ProviderURL:        getenv("PROVIDER_URL"),
		SimPublicURL:       getenv("SIM_PUBLIC_URL"),
		DemoAPIKey:         cmp.Or(getenv("DEMO_API_KEY"), DemoAPIKeyDefault),
		DemoPublishableKey: cmp.Or(getenv("DEMO_PUBLISHABLE_KEY"), DemoPublishableKeyDefault),
		DataDir:            cmp.Or(getenv("DATA_DIR"), DataDirDefault),
	}
	if p, err := strconv.Atoi(cfg.Port); err != nil || p < 0 || p > 65535 {
		return cfg, fmt.Errorf("PORT must be a port number, got %q", cfg.Port)
	}
	switch env := getenv("APP_ENV"); env {
	case "", "development":
	case "production":
		cfg.Production = true
	default:
		return cfg, fmt.Errorf("APP_ENV must be development or production, got %q", env)
	}
	// Development serves the unauthenticated simulator and a page holding
	// the demo key: only to this machine, unless HOST says otherwise.
	cfg.Host = getenv("HOST")
	if cfg.Host == "" && !cfg.Production {
		cfg.Host = "127.0.0.1"
	}
	allowed, err := parseAllowedHosts(getenv("ALLOWED_HOSTS"))
	if err != nil {
		return cfg, err
	}
	cfg.AllowedHosts = allowed
	cfg.MetricsAddr = getenv("METRICS_ADDR")
	cfg.LogFormat = getenv("LOG_FORMAT")
	switch cfg.LogFormat {
	case "":
		cfg.LogFormat = "text"
		if cfg.Production {
			cfg.LogFormat = "json"
		}
	case "json", "text":
	default:
		return cfg, fmt.Errorf("LOG_FORMAT must be json or text, got %q", cfg.LogFormat)
	}
	switch level := getenv("LOG_LEVEL"); level {
	case "", "info":
		cfg.LogLevel = slog.LevelInfo
	case "debug":
		cfg.LogLevel = slog.LevelDebug
	case "warn":
		cfg.LogLevel = slog.LevelWarn
	case "error":
		cfg.LogLevel = slog.LevelError
	default:
		return cfg, fmt.Errorf("LOG_LEVEL must be debug, info, warn or error, got %q", level)
	}
	for _, n := range []struct {
		dst      *int64
		name     string
		def, min int64
	}{
		{&cfg.MaxBodyBytes, "MAX_BODY_BYTES", graph.MaxBodyBytesDefault, 1024},
		{&cfg.MaxChargesPerRequest, "MAX_CHARGES_PER_REQUEST", graph.MaxChargesPerRequestDefault, 1},
		{&cfg.RateLimitMerchantBurst, "RATE_LIMIT_MERCHANT_BURST", RateLimitMerchantBurstDefault, 1},
		{&cfg.RateLimitIPBurst, "RATE_LIMIT_IP_BURST", RateLimitIPBurstDefault, 1},
		{&cfg.RateLimitPublishableBurst, "RATE_LIMIT_PUBLISHABLE_BURST", RateLimitPublishableBurstDefault, 1},
		{&cfg.RateLimitPublishableIPBurst, "RATE_LIMIT_PUBLISHABLE_IP_BURST", RateLimitPublishableIPBurstDefault, 1},
		{&cfg.ResultCacheSize, "RESULT_CACHE_SIZE", payment.ResultCacheSizeDefault, 0},
		{&cfg.RateLimitDeclinesKeyBurst, "RATE_LIMIT_DECLINES_KEY_BURST", cardtesting.KeyBurstDefault, 1},
		{&cfg.RateLimitDeclinesIPBurst, "RATE_LIMIT_DECLINES_IP_BURST", cardtesting.AddressBurstDefault, 1},
		{&cfg.SessionMaxAttempts, "SESSION_MAX_ATTEMPTS", payment.SessionMaxAttemptsDefault, 1},
		{&cfg.RateLimitStripeWebhookIPBurst, "RATE_LIMIT_STRIPE_WEBHOOK_IP_BURST", stripe.WebhookRateLimitBurstDefault, 1},
		{&cfg.LiveMaxWatchersPerAttempt, "LIVE_MAX_WATCHERS_PER_ATTEMPT", live.MaxWatchersPerAttemptDefault, 1},
		{&cfg.StreamMaxPerAddress, "STREAM_MAX_PER_ADDRESS", graph.StreamMaxPerAddressDefault, 1},
		{&cfg.StreamMaxPerMerchant, "STREAM_MAX_PER_MERCHANT", graph.StreamMaxPerMerchantDefault, 1},
		{&cfg.StreamMaxSubscriptions, "STREAM_MAX_SUBSCRIPTIONS", graph.StreamMaxSubscriptionsDefault, 1},
	} {
		v, err := integer(getenv, n.name, n.def, n.min)
		if err != nil {
			return cfg, err
		}
		*n.dst = v
	}
	for _, r := range []struct {
		dst  *float64
		name string
		def  float64
	}{
		{&cfg.RateLimitStripeWebhookIP, "RATE_LIMIT_STRIPE_WEBHOOK_IP", stripe.WebhookRateLimitDefault},
		{&cfg.RateLimitMerchant, "RATE_LIMIT_MERCHANT", RateLimitMerchantDefault},
		{&cfg.RateLimitIP, "RATE_LIMIT_IP", RateLimitIPDefault},
		{&cfg.RateLimitPublishable, "RATE_LIMIT_PUBLISHABLE", RateLimitPublishableDefault},
		{&cfg.RateLimitPublishableIP, "RATE_LIMIT_PUBLISHABLE_IP", RateLimitPublishableIPDefault},
		{&cfg.RateLimitDeclinesKey, "RATE_LIMIT_DECLINES_KEY", cardtesting.KeyRateDefault},
		{&cfg.RateLimitDeclinesIP, "RATE_LIMIT_DECLINES_IP", cardtesting.AddressRateDefault},
	} {
		v, err := perSecond(getenv, r.name, r.def)
		if err != nil {
			return cfg, err
		}
		*r.dst = v
	}
	for _, d := range []struct {
		dst       *time.Duration
		name      string
		def       time.Duration
		allowZero bool
	}{
		{&cfg.SlowDelay, "SIM_SLOW_DELAY", SimSlowDelayDefault, true},
		{&cfg.SimAuthorizationWindow, "SIM_AUTHORIZATION_WINDOW", SimAuthorizationWindowDefault, false},
		{&cfg.InstantDelay, "INSTANT_DELAY", 0, true},
		{&cfg.Lease, "PROCESSING_LEASE", payment.LeaseDefault, false},
		{&cfg.ReconcileInterval, "RECONCILE_INTERVAL", payment.ReconcileIntervalDefault, false},
		{&cfg.RedriveWindow, "REDRIVE_WINDOW", payment.RedriveWindowDefault, false},
		{&cfg.AuthenticationWindow, "AUTHENTICATION_WINDOW", payment.AuthenticationWindowDefault, false},
		{&cfg.AuthenticationCheckInterval, "AUTHENTICATION_CHECK_INTERVAL", payment.AuthenticationCheckIntervalDefault, false},
		{&cfg.RefundCheckInterval, "REFUND_CHECK_INTERVAL", payment.RefundCheckIntervalDefault, false},
		{&cfg.LateChargeWatch, "LATE_CHARGE_WATCH", payment.LateChargeWatchDefault, false},
		{&cfg.AuthorizationExpiryWarning, "AUTHORIZATION_EXPIRY_WARNING", payment.AuthorizationExpiryWarningDefault, false},
		{&cfg.KeyRetention, "KEY_RETENTION", payment.RetentionDefault, false},
		{&cfg.CleanupInterval, "CLEANUP_INTERVAL", payment.CleanupIntervalDefault, false},
		{&cfg.DBTimeout, "DB_TIMEOUT", payment.StoreTimeoutDefault, false},
		{&cfg.WebhookRetention, "WEBHOOK_RETENTION", webhook.RetentionDefault, false},
		{&cfg.LivePollInterval, "LIVE_POLL_INTERVAL", live.PollIntervalDefault, false},
		{&cfg.StreamMaxLifetime, "STREAM_MAX_LIFETIME", graph.StreamMaxLifetimeDefault, false},
		{&cfg.StreamRecheckInterval, "STREAM_RECHECK_INTERVAL", graph.StreamRecheckIntervalDefault, false},
		{&cfg.HistoryFlushInterval, "HISTORY_FLUSH_INTERVAL", history.FlushIntervalDefault, false},
		{&cfg.HistoryCountInterval, "HISTORY_COUNT_INTERVAL", history.CountIntervalDefault, false},
	} {
		v, err := duration(getenv, d.name, d.def)
		if err != nil {
			return cfg, err
		}
		if v == 0 && !d.allowZero {
			return cfg, fmt.Errorf("%s must be positive", d.name)
		}
		*d.dst = v
	}
	if crash := getenv("CHARGEONCE_CRASH_AT"); crash != "" {
		if !slices.Contains(faultPoints, crash) {
			return cfg, fmt.Errorf("CHARGEONCE_CRASH_AT must be one of %v, got %q", faultPoints, crash)
		}
		cfg.CrashAt = crash
	}
	switch v := getenv("WEBHOOK_ALLOW_PRIVATE_NETWORKS"); v {
	case "", "false":
	case "true":
		cfg.WebhookAllowPrivateNetworks = true
	default:
		return cfg, fmt.Errorf("WEBHOOK_ALLOW_PRIVATE_NETWORKS must be true or false, got %q", v)
	}
	cfg.NATSURL = getenv("NATS_URL")
	cfg.Instance = getenv("INSTANCE_NAME")
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s-%d", cmp.Or(host, "chargeonce"), os.Getpid())
	}
	for _, n := range []struct {
		dst           *int
		name          string
		def, min, max int64
	}{
		{&cfg.NATSPort, "EMBEDDED_NATS_PORT", events.EmbeddedPortDefault, 0, 65535},
		{&cfg.NATSReplicas, "NATS_REPLICAS", NATSReplicasDefault, 1, 5},
	} {
		v, err := integer(getenv, n.name, n.def, n.min)
		if err == nil && v > n.max {
			err = fmt.Errorf("%s must be at most %d, got %d", n.name, n.max, v)
		}
		if err != nil {
			return cfg, err
		}
		*n.dst = int(v)
	}
	if cfg.Production {
		if cfg.DatabaseURL == "" {
			return cfg, fmt.Errorf("DATABASE_URL is required when APP_ENV=production")
		}
		if cfg.NATSURL == "" {
			return cfg, fmt.Errorf("NATS_URL is required when APP_ENV=production: the embedded event broker is for development only")
		}
		if cfg.CrashAt != "" {
			return cfg, fmt.Errorf("CHARGEONCE_CRASH_AT is a crash-test fault and is refused when APP_ENV=production")
		}
	}
	if err := cfg.loadProvider(getenv); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// Rate limits by default: a merchant may average 500 requests a second with
// bursts of 1000 on each instance, which is more than one instance serves
// of fresh charges on a small machine, so the limit only stops a runaway
// client or a stolen key from starving everyone else (set it to what a
// merchant is meant to send); a client address without a valid API key, 10
// a second with bursts of 20, which no checkout needs and key guessing
// cannot live with.
const (
	RateLimitMerchantDefault      = 500
	RateLimitMerchantBurstDefault = 1000
	RateLimitIPDefault            = 10
	RateLimitIPBurstDefault       = 20
)

// Publishable keys' requests by default: a budget of their own per
// merchant, as large as the secret keys' (a merchant's shoppers together
// may send as much as its server), and per client address 10 a second with
// bursts of 50: a checkout page sends a handful of requests per payment and
// polls once a second at most, and one address of a card-testing script or
// a flood gets no further.
const (
	RateLimitPublishableDefault        = 500
	RateLimitPublishableBurstDefault   = 1000
	RateLimitPublishableIPDefault      = 10
	RateLimitPublishableIPBurstDefault = 50
)

// Defaults of the rest of the configuration that no package owns, the one
// place they are written.
const (
	PortDefault               = "8080"
	DemoAPIKeyDefault         = "demo-key"
	DemoPublishableKeyDefault = "co_pk_demo"
	DataDirDefault            = ".data"
	NATSReplicasDefault       = 1
)

// SimSlowDelayDefault is SIM_SLOW_DELAY's default: the simulator's own, which
// the configuration passes on, named here so that what reads the
// configuration need not know the simulator.
const SimSlowDelayDefault = cardsim.SlowDelayDefault

// SimAuthorizationWindowDefault is SIM_AUTHORIZATION_WINDOW's default: the
// simulator's own, as SimSlowDelayDefault.
const SimAuthorizationWindowDefault = cardsim.AuthorizationWindowDefault

// integer reads a whole number of at least min from the environment.
func integer(getenv func(string) string, name string, def, min int64) (int64, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min {
		return 0, fmt.Errorf("%s must be a whole number of at least %d, got %q", name, min, v)
	}
	return n, nil
}

// perSecond reads a rate (requests a second, 0 for no limit) from the environment.
func perSecond(getenv func(string) string, name string, def float64) (float64, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, fmt.Errorf("%s must be a number of requests a second (0 for no limit), got %q", name, v)
	}
	return n, nil
}

// duration reads a Go duration (e.g. 500ms, 3s) from the environment.
func duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s must be a duration such as 500ms or 3s, got %q", name, v)
	}
	return d, nil
}

// PaymentConfig is the payment service's share of the configuration.
func (c Config) PaymentConfig() payment.Config {
	pc := payment.Config{
		Retention:                   c.KeyRetention,
		Lease:                       c.Lease,
		ReconcileInterval:           c.ReconcileInterval,
		RedriveWindow:               c.RedriveWindow,
		StoreTimeout:                c.DBTimeout,
		AuthenticationWindow:        c.AuthenticationWindow,
		AuthenticationCheckInterval: c.AuthenticationCheckInterval,
		RefundCheckInterval:         c.RefundCheckInterval,
		LateChargeWatch:             c.LateChargeWatch,
		AuthorizationExpiryWarning:  c.AuthorizationExpiryWarning,
		ResultCacheSize:             int(c.ResultCacheSize),
		SessionMaxAttempts:          int(c.SessionMaxAttempts),
		Production:                  c.Production,
	}
	if c.ResultCacheSize == 0 {
		pc.ResultCacheSize = -1 // none; zero in payment.Config is the default
	}
	if c.CrashAt != "" {
		pc.Fault = func(p payment.FaultPoint) { c.Fault(string(p)) }
	}
	return pc
}

// Fault kills the process at point when CHARGEONCE_CRASH_AT names it.
func (c Config) Fault(point string) {
	if point == c.CrashAt {
		// A real, immediate death: no deferred function, no flush.
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
		select {}
	}
}

// StreamsConfig is the streams' share of the configuration; m records
// their metrics (nil: nowhere).
func (c Config) StreamsConfig(log *slog.Logger, m *metrics.Metrics) graph.StreamsConfig {
	return graph.StreamsConfig{
		MaxPerAddress: int(c.StreamMaxPerAddress), MaxPerMerchant: int(c.StreamMaxPerMerchant),
		MaxSubscriptions: int(c.StreamMaxSubscriptions), MaxLifetime: c.StreamMaxLifetime,
		RecheckInterval: c.StreamRecheckInterval, Logger: log, Metrics: m,
	}
}

// WebhookConfig is the webhook service's share of the configuration; m
// records its metrics (nil: nowhere).
func (c Config) WebhookConfig(m *metrics.Metrics) webhook.Config {
	return webhook.Config{Production: c.Production, AllowPrivateNetworks: c.WebhookAllowPrivateNetworks,
		Retention: c.WebhookRetention, CleanupInterval: c.CleanupInterval, Metrics: m}
}
