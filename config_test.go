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
	require.Equal(t, "text", cfg.LogFormat)
	require.Empty(t, cfg.MetricsAddr)

	prod, err := loadConfig(env(map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "PROVIDER_URL": "https://provider"}))
	require.NoError(t, err)
	require.Empty(t, prod.Host, "production listens on every interface")
	require.Equal(t, "json", prod.LogFormat)
}

func TestLoadConfig_RefusesBadValues(t *testing.T) {
	t.Parallel()
	prod := map[string]string{"APP_ENV": "production", "DATABASE_URL": "postgres://db", "PROVIDER_URL": "https://provider"}
	_, err := loadConfig(env(prod))
	require.NoError(t, err, "a complete production configuration")

	tests := map[string]map[string]string{
		"port not a number":         {"PORT": "http"},
		"unknown environment":       {"APP_ENV": "staging"},
		"lease not a duration":      {"PROCESSING_LEASE": "30"},
		"negative interval":         {"RECONCILE_INTERVAL": "-1s"},
		"zero retention":            {"KEY_RETENTION": "0s"},
		"unknown crash point":       {"CHARGEONCE_CRASH_AT": "somewhere"},
		"production without db":     {"APP_ENV": "production", "PROVIDER_URL": "https://provider"},
		"production, no provider":   {"APP_ENV": "production", "DATABASE_URL": "postgres://db"},
		"crash fault in production": {"APP_ENV": "production", "DATABASE_URL": "postgres://db", "PROVIDER_URL": "https://provider", "CHARGEONCE_CRASH_AT": "after-claim"},
		"tiny body limit":           {"MAX_BODY_BYTES": "10"},
		"body limit not a number":   {"MAX_BODY_BYTES": "64k"},
		"zero charges per request":  {"MAX_CHARGES_PER_REQUEST": "0"},
		"negative rate":             {"RATE_LIMIT_MERCHANT": "-1"},
		"rate not a number":         {"RATE_LIMIT_IP": "lots"},
		"fractional burst":          {"RATE_LIMIT_IP_BURST": "1.5"},
		"unknown log format":        {"LOG_FORMAT": "xml"},
		"zero database timeout":     {"DB_TIMEOUT": "0s"},
	}
	for name, vars := range tests {
		_, err := loadConfig(env(vars))
		require.Error(t, err, name)
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
