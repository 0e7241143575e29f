package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/cardsim"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestLoadConfig_Defaults(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(env(nil))
	require.NoError(t, err)
	require.Equal(t, "8080", cfg.Port)
	require.False(t, cfg.Production)
	require.Equal(t, "demo-key", cfg.DemoAPIKey)
	require.Equal(t, 30*time.Second, cfg.Lease)
	require.Equal(t, 5*time.Second, cfg.ReconcileInterval)
	require.Equal(t, 10*time.Minute, cfg.RedriveWindow)
	require.Equal(t, 24*time.Hour, cfg.KeyRetention)
	require.Equal(t, 3*time.Second, cfg.SlowDelay)
	require.Empty(t, cfg.CrashAt)
	require.Equal(t, "127.0.0.1", cfg.Host, "development answers only this machine")
	require.Equal(t, int64(64<<10), cfg.MaxBodyBytes)
	require.Equal(t, int64(1), cfg.MaxChargesPerRequest)
	require.Equal(t, 500.0, cfg.RateLimitMerchant)
	require.Equal(t, int64(1000), cfg.RateLimitMerchantBurst)
	require.Equal(t, 10.0, cfg.RateLimitIP)
	require.Equal(t, int64(20), cfg.RateLimitIPBurst)
	require.Equal(t, 5*time.Second, cfg.DBTimeout)
	require.Equal(t, 5*time.Second, cfg.LivePollInterval)
	require.Equal(t, "text", cfg.LogFormat)
	require.Empty(t, cfg.MetricsAddr)
	require.Empty(t, cfg.NATSURL, "development embeds the event broker")
	require.Equal(t, 4223, cfg.NATSPort)
	require.Equal(t, 1, cfg.NATSReplicas)

	prod, err := loadConfig(env(map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "PROVIDER_URL": "https://provider", "NATS_URL": "nats://broker:4222"}))
	require.NoError(t, err)
	require.Empty(t, prod.Host, "production listens on every interface")
	require.Equal(t, "json", prod.LogFormat)
}

func TestLoadConfig_RefusesBadValues(t *testing.T) {
	t.Parallel()
	prod := map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "PROVIDER_URL": "https://provider", "NATS_URL": "nats://broker:4222"}
	_, err := loadConfig(env(prod))
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
		{"production, no provider", map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db"}, "PROVIDER_URL"},
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
		{"unknown log format", map[string]string{"LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		{"zero database timeout", map[string]string{"DB_TIMEOUT": "0s"}, "DB_TIMEOUT"},
		{"negative simulator delay", map[string]string{"SIM_SLOW_DELAY": "-1s"}, "SIM_SLOW_DELAY"},
	}
	for _, tt := range tests {
		_, err := loadConfig(env(tt.vars))
		require.ErrorContains(t, err, tt.want, tt.name)
	}
	limits, err := loadConfig(env(map[string]string{"RATE_LIMIT_MERCHANT": "0", "RATE_LIMIT_IP": "0.5"}))
	require.NoError(t, err, "0 turns a limit off; rates may be fractions")
	require.Zero(t, limits.RateLimitMerchant)
	require.Equal(t, 0.5, limits.RateLimitIP)
	cfg, err := loadConfig(env(map[string]string{"CHARGEONCE_CRASH_AT": "after-provider"}))
	require.NoError(t, err, "crash faults are for development and tests")
	require.EqualValues(t, "after-provider", cfg.CrashAt)
}

func TestLoadConfig_SimSlowDelay_ZeroIsNoDelay(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(env(nil))
	require.NoError(t, err)
	require.Equal(t, cardsim.SlowDelayDefault, cfg.SlowDelay, "unset is the simulator's default")
	cfg, err = loadConfig(env(map[string]string{"SIM_SLOW_DELAY": "0"}))
	require.NoError(t, err)
	require.Zero(t, cfg.SlowDelay, "0 is passed on as no delay, not turned into the default")
	cfg, err = loadConfig(env(map[string]string{"SIM_SLOW_DELAY": "250ms"}))
	require.NoError(t, err)
	require.Equal(t, 250*time.Millisecond, cfg.SlowDelay)
}
