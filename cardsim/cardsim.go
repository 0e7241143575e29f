// Package cardsim is the simulated card provider that chargeonce charges in
// development and tests: a real HTTP API with its own idempotency keys, whose
// behaviour is chosen by the payment method token (success, declines, a slow
// charge, provider errors, a lost response, a card that needs 3-D Secure,
// whose shopper authenticates on the simulator's challenge page, cards
// whose refunds stay pending or fail later, and cards whose captures are
// declined, slow or lose their answer). A charge made with capture_method
// manual only authorizes: captures take part or all of it, a void releases
// it, and it expires after the authorization window. It keeps its state in its own
// PostgreSQL schema, cardsim, which its own migrations (Migrate) create only
// where it is mounted, never in production. chargeonce reaches it only over
// HTTP, so that chargeonce can neither read the provider's tables nor share
// its transactions: timeouts, dropped connections and retries between the
// two are as real as with a remote provider, and its charges are the ground
// truth that tests and the demo count.
package cardsim

import (
	"log/slog"
	"time"
)

// SlowDelayDefault is how long pm_card_slow takes in a development server
// unless configured (chargeonce's SIM_SLOW_DELAY): long enough to watch a
// retry meet a charge in flight.
const SlowDelayDefault = 3 * time.Second

// RefundSettleDefault is how long a pending refund (pm_card_refundPending,
// pm_card_refundFailsLater) stays pending unless configured.
const RefundSettleDefault = 2 * time.Second

// AuthorizationWindowDefault is how long an authorization stays open unless
// configured (chargeonce's SIM_AUTHORIZATION_WINDOW): a card network's
// usual hold of a week.
const AuthorizationWindowDefault = 7 * 24 * time.Hour

// Config tunes the simulator. The zero value is ready to use: no slow delay,
// pending refunds that settle after RefundSettleDefault, and authorizations
// open for AuthorizationWindowDefault.
type Config struct {
	// SlowDelay is how long pm_card_slow takes, and each capture of
	// pm_card_captureSlow; zero (or less) is no delay.
	SlowDelay time.Duration
	// RefundSettle is how long a pending refund stays pending; zero (or
	// less) is RefundSettleDefault.
	RefundSettle time.Duration
	// AuthorizationWindow is how long an authorization (a manual charge
	// that succeeded) stays open from then; zero (or less) is
	// AuthorizationWindowDefault.
	AuthorizationWindow time.Duration
	// PublicURL is where shoppers' browsers reach the simulator (e.g.
	// https://shop.example/provider), under which a waiting charge's
	// next_action sends them to the challenge page. Empty: each request's own
	// scheme, host and mount prefix, right when the browser reaches the
	// simulator at the address its caller does.
	PublicURL string
	Logger    *slog.Logger // may be nil: nothing is logged
}
