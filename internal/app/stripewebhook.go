package app

import (
	"log/slog"
	"net/http"

	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/provider/stripe"
	"chargeonce/ratelimit"
)

// StripeWebhookPath is where Stripe sends its events (POST), when
// PROVIDER=stripe: the URL of the endpoint in the Dashboard, or `stripe
// listen --forward-to`'s.
const StripeWebhookPath = "/stripe/webhook"

// newStripeWebhook is the endpoint of Stripe's events when cfg charges
// through Stripe, else nil (not mounted). Without STRIPE_WEBHOOK_SECRET it
// answers 503, as the log says at start: an event chargeonce cannot verify
// is never read, and the polls and the reconciler still find how each
// authentication ended, a little later. Anyone can post to it: it rations
// each client address (RATE_LIMIT_STRIPE_WEBHOOK_IP), reads at most
// stripe.WebhookMaxBodyBytes before the signature is checked, and logs its
// refusals sampled, counting each in m.
func newStripeWebhook(cfg Config, payments *payment.Service, log *slog.Logger, m *metrics.Metrics) http.Handler {
	if cfg.Provider != ProviderStripe {
		return nil
	}
	if cfg.StripeWebhookSecret == "" {
		log.Warn("STRIPE_WEBHOOK_SECRET is not set: POST " + StripeWebhookPath + " answers 503, and how a 3-D Secure authentication ended is found by polls and the reconciler only")
	}
	return stripe.WebhookHandler(stripe.WebhookConfig{Secret: string(cfg.StripeWebhookSecret), Payments: payments, Logger: log,
		Limiter: ratelimit.New(cfg.RateLimitStripeWebhookIP, int(cfg.RateLimitStripeWebhookIPBurst), 0), Metrics: m})
}
