package app

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
	"chargeonce/provider/instant"
	"chargeonce/provider/stripe"
)

// The card providers that PROVIDER names. Another one is a constant here, a
// case in loadProvider and one in NewProvider.
const (
	// ProviderCardsim speaks the simulator's HTTP API: the simulator served
	// in process, or the one at PROVIDER_URL. Development only.
	ProviderCardsim = "cardsim"
	// ProviderStripe charges through Stripe with STRIPE_SECRET_KEY.
	ProviderStripe = "stripe"
	// ProviderInstant answers at once and stores nothing, so that
	// benchmarks measure chargeonce alone. Development only.
	ProviderInstant = "instant"
)

var providers = []string{ProviderCardsim, ProviderStripe, ProviderInstant}

// providerTimeout bounds one call to the card provider.
const providerTimeout = 10 * time.Second

// stripeKeyWindow is how long Stripe keeps the saved result of an
// idempotency key: 24 hours. A re-send under our key after that could charge
// a second time, so the redrive window must end before it.
const stripeKeyWindow = 24 * time.Hour

// secret is a configuration value that is never printed: it formats, logs
// and marshals as [redacted]. string(s) is the value.
type secret string

const redacted = "[redacted]"

func (secret) String() string                  { return redacted }
func (secret) GoString() string                { return redacted }
func (secret) LogValue() slog.Value            { return slog.StringValue(redacted) }
func (secret) MarshalText() ([]byte, error)    { return []byte(redacted), nil }
func (s secret) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(redacted)) }

// loadProvider reads PROVIDER and its settings; cfg.Production and
// cfg.RedriveWindow must be read already. No refusal quotes a secret.
func (cfg *Config) loadProvider(getenv func(string) string) error {
	cfg.Provider = cmp.Or(getenv("PROVIDER"), ProviderCardsim)
	switch cfg.Provider {
	case ProviderCardsim:
		if cfg.Production {
			return errors.New("PROVIDER=cardsim (the default) is the simulated card provider, for development only: set PROVIDER=stripe when APP_ENV=production")
		}
	case ProviderInstant:
		if cfg.Production {
			return errors.New("PROVIDER=instant charges nothing and is for development and benchmarks only: set PROVIDER=stripe when APP_ENV=production")
		}
	case ProviderStripe:
		key := getenv("STRIPE_SECRET_KEY")
		switch {
		case key == "":
			return errors.New("STRIPE_SECRET_KEY is required when PROVIDER=stripe")
		case !cfg.Production && !strings.HasPrefix(key, "sk_test_"):
			return fmt.Errorf("STRIPE_SECRET_KEY must be a test-mode secret key (sk_test_…) unless APP_ENV=production; it is %s", stripeKeyKind(key))
		case !strings.HasPrefix(key, "sk_") && !strings.HasPrefix(key, "rk_"):
			return fmt.Errorf("STRIPE_SECRET_KEY must be a Stripe secret key (sk_…) or restricted key (rk_…); it is %s", stripeKeyKind(key))
		}
		cfg.StripeSecretKey = secret(key)
		cfg.StripeAPIBase = cmp.Or(getenv("STRIPE_API_BASE"), stripe.APIBaseDefault)
		if err := checkStripeAPIBase(cfg.StripeAPIBase, cfg.Production); err != nil {
			return err
		}
		// Optional: without it the webhook endpoint answers 503, and polls and
		// the reconciler still find how each authentication ended.
		hook := getenv("STRIPE_WEBHOOK_SECRET")
		if hook != "" && !strings.HasPrefix(hook, "whsec_") {
			return errors.New("STRIPE_WEBHOOK_SECRET must be a webhook endpoint's signing secret (whsec_…), as the Dashboard or `stripe listen` prints it")
		}
		cfg.StripeWebhookSecret = secret(hook)
		if cfg.RedriveWindow >= stripeKeyWindow {
			return fmt.Errorf("REDRIVE_WINDOW must be shorter than 24h when PROVIDER=stripe: Stripe keeps the result of our idempotency key for 24 hours, and a charge sent again after that could be charged twice; got %s", cfg.RedriveWindow)
		}
	default:
		return fmt.Errorf("PROVIDER must be one of %v, got %q", providers, cfg.Provider)
	}
	return nil
}

// stripeKeyKind says what kind of key key is, without quoting it.
func stripeKeyKind(key string) string {
	for prefix, kind := range map[string]string{
		"sk_live_": "a live-mode secret key (sk_live_…)",
		"rk_live_": "a live-mode restricted key (rk_live_…)",
		"rk_test_": "a test-mode restricted key (rk_test_…)",
		"pk_live_": "a publishable key (pk_live_…), not a secret key",
		"pk_test_": "a publishable key (pk_test_…), not a secret key",
		"sk_test_": "a test-mode secret key (sk_test_…)",
	} {
		if strings.HasPrefix(key, prefix) {
			return kind
		}
	}
	return "not a Stripe secret key"
}

// checkStripeAPIBase refuses a STRIPE_API_BASE that is not an http(s) URL;
// in production, one that would send the secret key in clear text to
// another machine (http:// is for stripe-mock or a fake on this one).
func checkStripeAPIBase(base string, production bool) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("STRIPE_API_BASE must be an http:// or https:// URL, got %q", base)
	}
	if production && u.Scheme == "http" {
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("STRIPE_API_BASE must be https:// when APP_ENV=production (http:// only to this machine), got %q", base)
		}
	}
	return nil
}

// NewProvider is the card provider that cfg names. For cardsim it is the
// simulator's API at providerURL; transport carries the requests (nil: the
// network).
func NewProvider(cfg Config, providerURL string, transport http.RoundTripper, log *slog.Logger) payment.Provider {
	switch cfg.Provider {
	case ProviderInstant:
		return instant.Provider{Delay: cfg.InstantDelay}
	case ProviderStripe:
		return stripe.New(stripe.Config{SecretKey: string(cfg.StripeSecretKey), APIBase: cfg.StripeAPIBase,
			Timeout: providerTimeout, Transport: transport, Logger: log})
	default:
		return simprovider.New(providerURL, providerTimeout, transport)
	}
}

// ProviderName says which provider cfg charges through, for the log.
func ProviderName(cfg Config, providerURL string) string {
	switch cfg.Provider {
	case ProviderStripe:
		return "stripe " + cfg.StripeAPIBase
	case ProviderInstant:
		return "instant (in process, charges nothing)"
	}
	return providerURL
}
