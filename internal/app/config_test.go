package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/events"
	"chargeonce/graph"
	"chargeonce/live"
	"chargeonce/payment"
	"chargeonce/provider/stripe"
	"chargeonce/webhook"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestLoadConfig_Defaults(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(env(nil))
	require.NoError(t, err)
	// Unset, every setting is its package's default, the one place each
	// is written.
	require.Equal(t, PortDefault, cfg.Port)
	require.False(t, cfg.Production)
	require.Equal(t, DemoAPIKeyDefault, cfg.DemoAPIKey)
	require.Equal(t, DataDirDefault, cfg.DataDir)
	require.Equal(t, payment.LeaseDefault, cfg.Lease)
	require.Equal(t, payment.ReconcileIntervalDefault, cfg.ReconcileInterval)
	require.Equal(t, payment.RedriveWindowDefault, cfg.RedriveWindow)
	require.Equal(t, payment.RetentionDefault, cfg.KeyRetention)
	require.Equal(t, payment.CleanupIntervalDefault, cfg.CleanupInterval)
	require.Equal(t, payment.StoreTimeoutDefault, cfg.DBTimeout)
	require.Equal(t, int64(payment.ResultCacheSizeDefault), cfg.ResultCacheSize)
	require.Equal(t, SimSlowDelayDefault, cfg.SlowDelay)
	require.Equal(t, SimAuthorizationWindowDefault, cfg.SimAuthorizationWindow)
	require.Empty(t, cfg.CrashAt)
	require.Equal(t, "127.0.0.1", cfg.Host, "development answers only this machine")
	require.Equal(t, int64(graph.MaxBodyBytesDefault), cfg.MaxBodyBytes)
	require.Equal(t, int64(graph.MaxChargesPerRequestDefault), cfg.MaxChargesPerRequest)
	require.Equal(t, float64(RateLimitMerchantDefault), cfg.RateLimitMerchant)
	require.Equal(t, int64(RateLimitMerchantBurstDefault), cfg.RateLimitMerchantBurst)
	require.Equal(t, float64(RateLimitIPDefault), cfg.RateLimitIP)
	require.Equal(t, int64(RateLimitIPBurstDefault), cfg.RateLimitIPBurst)
	require.Equal(t, float64(RateLimitPublishableDefault), cfg.RateLimitPublishable)
	require.Equal(t, int64(RateLimitPublishableBurstDefault), cfg.RateLimitPublishableBurst)
	require.Equal(t, float64(RateLimitPublishableIPDefault), cfg.RateLimitPublishableIP)
	require.Equal(t, int64(RateLimitPublishableIPBurstDefault), cfg.RateLimitPublishableIPBurst)
	require.Equal(t, live.PollIntervalDefault, cfg.LivePollInterval)
	require.Equal(t, int64(live.MaxWatchersPerAttemptDefault), cfg.LiveMaxWatchersPerAttempt)
	require.Equal(t, int64(graph.StreamMaxPerAddressDefault), cfg.StreamMaxPerAddress)
	require.Equal(t, int64(graph.StreamMaxPerMerchantDefault), cfg.StreamMaxPerMerchant)
	require.Equal(t, int64(graph.StreamMaxSubscriptionsDefault), cfg.StreamMaxSubscriptions)
	require.Equal(t, graph.StreamMaxLifetimeDefault, cfg.StreamMaxLifetime)
	require.Equal(t, graph.StreamRecheckIntervalDefault, cfg.StreamRecheckInterval)
	require.Equal(t, webhook.RetentionDefault, cfg.WebhookRetention)
	require.Equal(t, "text", cfg.LogFormat, "people read development's log")
	require.Equal(t, slog.LevelInfo, cfg.LogLevel)
	require.Empty(t, cfg.MetricsAddr)
	require.Empty(t, cfg.NATSURL, "development embeds the event broker")
	require.Equal(t, events.EmbeddedPortDefault, cfg.NATSPort)
	require.Equal(t, NATSReplicasDefault, cfg.NATSReplicas)

	prod, err := LoadConfig(env(map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "NATS_URL": "nats://broker:4222",
		"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_0123456789abcdef"}))
	require.NoError(t, err)
	require.Empty(t, prod.Host, "production listens on every interface")
	require.Equal(t, "json", prod.LogFormat)
}

func TestLoadConfig_RefusesBadValues(t *testing.T) {
	t.Parallel()
	prod := map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "NATS_URL": "nats://broker:4222",
		"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_0123456789abcdef"}
	_, err := LoadConfig(env(prod))
	require.NoError(t, err, "a complete production configuration")

	// Each refusal names the variable at fault, so that an operator knows what to fix.
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"port not a number", map[string]string{"PORT": "http"}, "PORT"},
		{"unknown environment", map[string]string{"APP_ENV": "staging"}, "APP_ENV"},
		{"lease not a duration", map[string]string{"PROCESSING_LEASE": "30"}, "PROCESSING_LEASE"},
		{"negative interval", map[string]string{"RECONCILE_INTERVAL": "-1s"}, "RECONCILE_INTERVAL"},
		{"zero retention", map[string]string{"KEY_RETENTION": "0s"}, "KEY_RETENTION"},
		{"unknown crash point", map[string]string{"CHARGEONCE_CRASH_AT": "somewhere"}, "CHARGEONCE_CRASH_AT"},
		{"production without db", map[string]string{"APP_ENV": "production", "PROVIDER_URL": "https://provider"}, "DATABASE_URL"},
		{"production, instant provider", map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "NATS_URL": "nats://broker:4222", "PROVIDER": "instant"}, "PROVIDER=instant"},
		{"unknown provider", map[string]string{"PROVIDER": "paypal"}, "PROVIDER"},
		{"production, simulated provider", map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "NATS_URL": "nats://broker:4222", "PROVIDER_URL": "https://provider"}, "PROVIDER"},
		{"crash fault in production", map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "PROVIDER_URL": "https://provider", "NATS_URL": "nats://broker:4222", "CHARGEONCE_CRASH_AT": "after-claim"}, "CHARGEONCE_CRASH_AT"},
		{"production, no event broker", map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "PROVIDER_URL": "https://provider"}, "NATS_URL"},
		{"embedded broker port out of range", map[string]string{"EMBEDDED_NATS_PORT": "70000"}, "EMBEDDED_NATS_PORT"},
		{"zero stream replicas", map[string]string{"NATS_REPLICAS": "0"}, "NATS_REPLICAS"},
		{"tiny body limit", map[string]string{"MAX_BODY_BYTES": "10"}, "MAX_BODY_BYTES"},
		{"body limit not a number", map[string]string{"MAX_BODY_BYTES": "64k"}, "MAX_BODY_BYTES"},
		{"zero charges per request", map[string]string{"MAX_CHARGES_PER_REQUEST": "0"}, "MAX_CHARGES_PER_REQUEST"},
		{"negative rate", map[string]string{"RATE_LIMIT_MERCHANT": "-1"}, "RATE_LIMIT_MERCHANT"},
		{"rate not a number", map[string]string{"RATE_LIMIT_IP": "lots"}, "RATE_LIMIT_IP"},
		{"fractional burst", map[string]string{"RATE_LIMIT_IP_BURST": "1.5"}, "RATE_LIMIT_IP_BURST"},
		{"negative publishable rate", map[string]string{"RATE_LIMIT_PUBLISHABLE": "-5"}, "RATE_LIMIT_PUBLISHABLE"},
		{"zero publishable address burst", map[string]string{"RATE_LIMIT_PUBLISHABLE_IP_BURST": "0"}, "RATE_LIMIT_PUBLISHABLE_IP_BURST"},
		{"unknown log format", map[string]string{"LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		{"unknown log level", map[string]string{"LOG_LEVEL": "verbose"}, "LOG_LEVEL"},
		{"log level in capitals", map[string]string{"LOG_LEVEL": "DEBUG"}, "LOG_LEVEL"},
		{"zero database timeout", map[string]string{"DB_TIMEOUT": "0s"}, "DB_TIMEOUT"},
		{"negative simulator delay", map[string]string{"SIM_SLOW_DELAY": "-1s"}, "SIM_SLOW_DELAY"},
		{"zero authorization window", map[string]string{"SIM_AUTHORIZATION_WINDOW": "0s"}, "SIM_AUTHORIZATION_WINDOW"},
		{"authorization window in days", map[string]string{"SIM_AUTHORIZATION_WINDOW": "7d"}, "SIM_AUTHORIZATION_WINDOW"},
		{"zero watchers per attempt", map[string]string{"LIVE_MAX_WATCHERS_PER_ATTEMPT": "0"}, "LIVE_MAX_WATCHERS_PER_ATTEMPT"},
		{"zero streams per address", map[string]string{"STREAM_MAX_PER_ADDRESS": "0"}, "STREAM_MAX_PER_ADDRESS"},
		{"streams per merchant not a number", map[string]string{"STREAM_MAX_PER_MERCHANT": "many"}, "STREAM_MAX_PER_MERCHANT"},
		{"negative subscriptions per socket", map[string]string{"STREAM_MAX_SUBSCRIPTIONS": "-5"}, "STREAM_MAX_SUBSCRIPTIONS"},
		{"zero stream lifetime", map[string]string{"STREAM_MAX_LIFETIME": "0s"}, "STREAM_MAX_LIFETIME"},
		{"stream lifetime not a duration", map[string]string{"STREAM_MAX_LIFETIME": "3600"}, "STREAM_MAX_LIFETIME"},
		{"zero recheck interval", map[string]string{"STREAM_RECHECK_INTERVAL": "0s"}, "STREAM_RECHECK_INTERVAL"},
	}
	for _, tt := range tests {
		_, err := LoadConfig(env(tt.vars))
		require.ErrorContains(t, err, tt.want, tt.name)
	}
	limits, err := LoadConfig(env(map[string]string{"RATE_LIMIT_MERCHANT": "0", "RATE_LIMIT_IP": "0.5"}))
	require.NoError(t, err, "0 turns a limit off; rates may be fractions")
	require.Zero(t, limits.RateLimitMerchant)
	require.Equal(t, 0.5, limits.RateLimitIP)
	cfg, err := LoadConfig(env(map[string]string{"CHARGEONCE_CRASH_AT": "after-provider"}))
	require.NoError(t, err, "crash faults are for development and tests")
	require.EqualValues(t, "after-provider", cfg.CrashAt)
}

func TestLoadConfig_SimSlowDelay_ZeroIsNoDelay(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(env(nil))
	require.NoError(t, err)
	require.Equal(t, SimSlowDelayDefault, cfg.SlowDelay, "unset is the simulator's default")
	cfg, err = LoadConfig(env(map[string]string{"SIM_SLOW_DELAY": "0"}))
	require.NoError(t, err)
	require.Zero(t, cfg.SlowDelay, "0 is passed on as no delay, not turned into the default")
	cfg, err = LoadConfig(env(map[string]string{"SIM_SLOW_DELAY": "250ms"}))
	require.NoError(t, err)
	require.Equal(t, 250*time.Millisecond, cfg.SlowDelay)
}

func TestLoadConfig_SimAuthorizationWindow_IsAGoDuration(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(env(map[string]string{"SIM_AUTHORIZATION_WINDOW": "90s"}))
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.SimAuthorizationWindow)
}

func TestLoadConfig_Provider(t *testing.T) {
	t.Parallel()
	const testKey, liveKey = "sk_test_51Secretive0000000000", "sk_live_51Secretive0000000000"
	prod := func(vars map[string]string) map[string]string {
		out := map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "NATS_URL": "nats://broker:4222"}
		maps.Copy(out, vars)
		return out
	}

	cfg, err := LoadConfig(env(nil))
	require.NoError(t, err)
	require.Equal(t, "cardsim", cfg.Provider, "the simulator by default, in development")
	cfg, err = LoadConfig(env(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": testKey}))
	require.NoError(t, err)
	require.Equal(t, "stripe", cfg.Provider)
	require.Equal(t, testKey, string(cfg.StripeSecretKey))
	require.Equal(t, "https://api.stripe.com", cfg.StripeAPIBase, "Stripe's own API by default")
	cfg, err = LoadConfig(env(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": testKey,
		"STRIPE_API_BASE": "http://127.0.0.1:12111", "REDRIVE_WINDOW": "23h59m"}))
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:12111", cfg.StripeAPIBase)
	_, err = LoadConfig(env(prod(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": liveKey})))
	require.NoError(t, err, "production takes a live key")
	_, err = LoadConfig(env(prod(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "rk_live_51Restricted",
		"STRIPE_API_BASE": "http://localhost:12111"})))
	require.NoError(t, err, "a restricted key; plain http to this machine only")

	// Each refusal names the variable at fault, and none quotes the key.
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"unknown provider", map[string]string{"PROVIDER": "paypal"}, "PROVIDER must be one of"},
		{"stripe without a key", map[string]string{"PROVIDER": "stripe"}, "STRIPE_SECRET_KEY is required when PROVIDER=stripe"},
		{"live key in development", map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": liveKey}, "STRIPE_SECRET_KEY must be a test-mode secret key (sk_test_…)"},
		{"restricted live key in development", map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "rk_live_51Secretive0000"}, "STRIPE_SECRET_KEY must be a test-mode secret key"},
		{"publishable key in development", map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "pk_test_51Secretive0000"}, "publishable key"},
		{"not a key in production", prod(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "hunter2-Secretive"}), "STRIPE_SECRET_KEY must be a Stripe secret key"},
		{"simulator in production", prod(map[string]string{"PROVIDER": "cardsim", "PROVIDER_URL": "https://provider"}), "PROVIDER=cardsim"},
		{"default provider in production", prod(nil), "set PROVIDER=stripe when APP_ENV=production"},
		{"redrive window of Stripe's key lifetime", map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": testKey, "REDRIVE_WINDOW": "24h"}, "REDRIVE_WINDOW must be shorter than 24h when PROVIDER=stripe"},
		{"redrive window beyond it", map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": testKey, "REDRIVE_WINDOW": "36h"}, "REDRIVE_WINDOW"},
		{"API base not a URL", map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": testKey, "STRIPE_API_BASE": "api.stripe.com"}, "STRIPE_API_BASE"},
		{"plain http to another machine in production", prod(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": liveKey, "STRIPE_API_BASE": "http://stripe.example"}), "STRIPE_API_BASE must be https://"},
	}
	for _, tt := range tests {
		_, err := LoadConfig(env(tt.vars))
		require.ErrorContains(t, err, tt.want, tt.name)
		require.NotContains(t, err.Error(), "Secretive", "%s: the refusal never quotes the key", tt.name)
	}
	_, err = LoadConfig(env(map[string]string{"REDRIVE_WINDOW": "36h"}))
	require.NoError(t, err, "the simulator keeps its keys as long as it likes")
}

func TestConfig_StripeSecretKeyIsNeverPrinted(t *testing.T) {
	t.Parallel()
	const key = "sk_test_51Secretive0000000000"
	cfg, err := LoadConfig(env(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": key}))
	require.NoError(t, err)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", cfg, "key", cfg.StripeSecretKey)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "key", cfg.StripeSecretKey)
	asJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	for _, out := range []string{
		fmt.Sprintf("%v %+v %#v %s %q", cfg, cfg, cfg, cfg.StripeSecretKey, cfg.StripeSecretKey),
		logged.String(), string(asJSON),
	} {
		require.NotContains(t, out, "Secretive")
	}
	require.Contains(t, logged.String(), "[redacted]")
}

func TestLoadConfig_WebhookRetention(t *testing.T) {
	t.Parallel()
	getenv := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	cfg, err := LoadConfig(getenv(nil))
	require.NoError(t, err)
	require.Equal(t, webhook.RetentionDefault, cfg.WebhookRetention)
	require.Equal(t, webhook.RetentionDefault, cfg.WebhookConfig(nil).Retention)
	cfg, err = LoadConfig(getenv(map[string]string{"WEBHOOK_RETENTION": "72h", "APP_ENV": "production",
		"DATABASE_URL": "postgres://db", "PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_0123456789abcdef", "NATS_URL": "nats://broker:4222"}))
	require.NoError(t, err)
	wc := cfg.WebhookConfig(nil)
	require.Equal(t, 72*time.Hour, wc.Retention)
	require.True(t, wc.Production)
	for _, bad := range []string{"0s", "-1h", "30"} {
		_, err = LoadConfig(getenv(map[string]string{"WEBHOOK_RETENTION": bad}))
		require.ErrorContains(t, err, "WEBHOOK_RETENTION", bad)
	}
}

// TestLoadConfig_TheOuterDoor: the settings of the Stripe webhook's limit,
// the host names a server answers for and the webhooks' private networks:
// their defaults, and the refusal of bad values.
func TestLoadConfig_TheOuterDoor(t *testing.T) {
	t.Parallel()
	prod := func(vars map[string]string) map[string]string {
		out := map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "NATS_URL": "nats://broker:4222",
			"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_0123456789abcdef"}
		maps.Copy(out, vars)
		return out
	}
	cfg, err := LoadConfig(env(nil))
	require.NoError(t, err)
	require.Equal(t, float64(stripe.WebhookRateLimitDefault), cfg.RateLimitStripeWebhookIP)
	require.Equal(t, int64(stripe.WebhookRateLimitBurstDefault), cfg.RateLimitStripeWebhookIPBurst)
	require.Empty(t, cfg.AllowedHosts)
	require.False(t, cfg.WebhookAllowPrivateNetworks)
	require.False(t, cfg.WebhookConfig(nil).AllowPrivateNetworks)
	require.False(t, cfg.PaymentConfig().Production)
	require.True(t, answeredHosts(cfg).answers("localhost:8080"))
	require.False(t, answeredHosts(cfg).answers("rebind.attacker.example"), "development checks host names")
	p, err := LoadConfig(env(prod(nil)))
	require.NoError(t, err)
	require.True(t, p.PaymentConfig().Production)
	require.True(t, answeredHosts(p).answers("rebind.attacker.example"), "production without ALLOWED_HOSTS: the proxy's job")

	cfg, err = LoadConfig(env(map[string]string{"RATE_LIMIT_STRIPE_WEBHOOK_IP": "0", "RATE_LIMIT_STRIPE_WEBHOOK_IP_BURST": "5",
		"ALLOWED_HOSTS": " DevBox.lan., 10.0.0.7 ,[fd00::7],,", "HOST": "192.168.1.5"}))
	require.NoError(t, err)
	require.Zero(t, cfg.RateLimitStripeWebhookIP, "0 turns the limit off")
	require.Equal(t, int64(5), cfg.RateLimitStripeWebhookIPBurst)
	require.Equal(t, []string{"devbox.lan", "10.0.0.7", "fd00::7"}, cfg.AllowedHosts)
	hosts := answeredHosts(cfg)
	for _, host := range []string{"devbox.lan:8080", "DEVBOX.LAN", "10.0.0.7", "[fd00::7]:8080", "192.168.1.5:8080", "127.0.0.9", "[::1]"} {
		require.True(t, hosts.answers(host), host)
	}
	for _, host := range []string{"evil.devbox.lan", "10.0.0.8", "0.0.0.0:8080", "", "devbox.lan.attacker.example"} {
		require.False(t, hosts.answers(host), host)
	}
	require.False(t, answeredHosts(Config{Host: "0.0.0.0"}).answers("0.0.0.0"), "an unspecified HOST names nothing")
	p, err = LoadConfig(env(prod(map[string]string{"ALLOWED_HOSTS": "api.shop.example", "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true"})))
	require.NoError(t, err)
	require.True(t, answeredHosts(p).answers("api.shop.example:443"))
	require.False(t, answeredHosts(p).answers("rebind.attacker.example"), "production with ALLOWED_HOSTS enforces it")
	require.True(t, p.WebhookConfig(nil).AllowPrivateNetworks)

	for _, tt := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"RATE_LIMIT_STRIPE_WEBHOOK_IP": "-1"}, "RATE_LIMIT_STRIPE_WEBHOOK_IP"},
		{map[string]string{"RATE_LIMIT_STRIPE_WEBHOOK_IP": "many"}, "RATE_LIMIT_STRIPE_WEBHOOK_IP"},
		{map[string]string{"RATE_LIMIT_STRIPE_WEBHOOK_IP_BURST": "0"}, "RATE_LIMIT_STRIPE_WEBHOOK_IP_BURST"},
		{map[string]string{"ALLOWED_HOSTS": "https://shop.example"}, "ALLOWED_HOSTS must be comma-separated host names"},
		{map[string]string{"ALLOWED_HOSTS": "shop.example:8080"}, "ALLOWED_HOSTS"},
		{map[string]string{"ALLOWED_HOSTS": "shop.example/x"}, "ALLOWED_HOSTS"},
		{map[string]string{"ALLOWED_HOSTS": "*.shop.example"}, "ALLOWED_HOSTS"},
		{map[string]string{"WEBHOOK_ALLOW_PRIVATE_NETWORKS": "yes"}, "WEBHOOK_ALLOW_PRIVATE_NETWORKS must be true or false"},
	} {
		_, err := LoadConfig(env(tt.vars))
		require.ErrorContains(t, err, tt.want, "%v", tt.vars)
	}
}

func TestConfig_StripeWebhookSecret_NeverPrintedAndChecked(t *testing.T) {
	t.Parallel()
	const hook = "whsec_Secretive000000000000"
	cfg, err := LoadConfig(env(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_51Key", "STRIPE_WEBHOOK_SECRET": hook}))
	require.NoError(t, err)
	require.Equal(t, hook, string(cfg.StripeWebhookSecret))
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", cfg, "hook", cfg.StripeWebhookSecret)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "hook", cfg.StripeWebhookSecret)
	asJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	for _, out := range []string{
		fmt.Sprintf("%v %+v %#v %s %q", cfg, cfg, cfg, cfg.StripeWebhookSecret, cfg.StripeWebhookSecret),
		logged.String(), string(asJSON),
	} {
		require.NotContains(t, out, "Secretive")
	}

	cfg, err = LoadConfig(env(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_51Key"}))
	require.NoError(t, err, "optional: the polls and the reconciler work without it")
	require.Empty(t, cfg.StripeWebhookSecret)
	_, err = LoadConfig(env(map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "NATS_URL": "nats://broker:4222",
		"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_0123456789abcdef"}))
	require.NoError(t, err, "optional in production too")

	_, err = LoadConfig(env(map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_51Key", "STRIPE_WEBHOOK_SECRET": "sk_test_Secretive"}))
	require.ErrorContains(t, err, "STRIPE_WEBHOOK_SECRET must be a webhook endpoint's signing secret (whsec_…)")
	require.NotContains(t, err.Error(), "Secretive")
}
