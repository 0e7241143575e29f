// Package graph is chargeonce's GraphQL layer: the schema, thin resolvers
// that validate GraphQL-level input, call one payment method and map the
// result, the HTTP middleware that carries the API key and the
// Idempotency-Key header, and the error presenter that turns domain errors
// into extensions.code. The code under generated/ and model/ is gqlgen's.
package graph

import (
	"chargeonce/cardtesting"
	"chargeonce/live"
	"chargeonce/merchant"
	"chargeonce/metrics"
	"chargeonce/payment"
)

//go:generate go tool gqlgen generate

// Resolver is the root resolver: it holds what the resolvers call into.
type Resolver struct {
	Payments  *payment.Service
	Merchants *merchant.Service
	// Live tells chargeUpdated subscribers when an attempt changes; nil
	// refuses subscriptions.
	Live *live.Hub
	// Declines rations publishable keys' declined charges and guessed
	// client secrets (card testing); nil: no limit.
	Declines *cardtesting.Guard
	// Metrics counts what the resolvers refuse; nil: nowhere.
	Metrics *metrics.Metrics
}
