// Package graph is chargeonce's GraphQL layer: the schema, thin resolvers
// that validate GraphQL-level input, call one payment method and map the
// result, the HTTP middleware that carries the API key and the
// Idempotency-Key header, and the error presenter that turns domain errors
// into extensions.code. The code under generated/ and model/ is gqlgen's.
package graph

import (
	"chargeonce/live"
	"chargeonce/merchant"
	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/ratelimit"
)

//go:generate go tool gqlgen generate

// Resolver is the root resolver: it holds what the resolvers call into.
type Resolver struct {
	Payments  *payment.Service
	Merchants *merchant.Service
	// Live tells chargeUpdated subscribers when an attempt changes; nil
	// refuses subscriptions.
	Live *live.Hub
	// KeyDeclines and IPDeclines ration publishable keys' declined charges
	// (card testing), per key and per client address; nil: no limit.
	KeyDeclines, IPDeclines *ratelimit.Limiter
	// Metrics counts the declines and their refusals; nil: nowhere.
	Metrics *metrics.Metrics
}
