package main

import (
	"cmp"
	"fmt"
	"strconv"
	"time"
)

// config is chargeonce's configuration, read from the environment.
type config struct {
	Port        string        // PORT: listen port, default 8080 (0 picks a free one)
	DatabaseURL string        // DATABASE_URL: empty starts a project-local PostgreSQL (development only)
	Production  bool          // APP_ENV=production: no demo merchant, no playground, no simulator
	ProviderURL string        // PROVIDER_URL: card provider base URL; empty uses the in-process simulator
	DemoAPIKey  string        // DEMO_API_KEY: the demo merchant's key in development, default demo-key
	SlowDelay   time.Duration // SIM_SLOW_DELAY: how long the simulator takes for pm_card_slow, default 3s
	DataDir     string        // DATA_DIR: where the project-local PostgreSQL lives, default .data
}

func loadConfig(getenv func(string) string) (config, error) {
	cfg := config{
		Port:        cmp.Or(getenv("PORT"), "8080"),
		DatabaseURL: getenv("DATABASE_URL"),
		ProviderURL: getenv("PROVIDER_URL"),
		DemoAPIKey:  cmp.Or(getenv("DEMO_API_KEY"), "demo-key"),
		DataDir:     cmp.Or(getenv("DATA_DIR"), ".data"),
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
	var err error
	if cfg.SlowDelay, err = duration(getenv, "SIM_SLOW_DELAY", 3*time.Second); err != nil {
		return cfg, err
	}
	if cfg.Production {
		if cfg.DatabaseURL == "" {
			return cfg, fmt.Errorf("DATABASE_URL is required when APP_ENV=production")
		}
		if cfg.ProviderURL == "" {
			return cfg, fmt.Errorf("PROVIDER_URL is required when APP_ENV=production: the simulated provider is for development only")
		}
	}
	return cfg, nil
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
