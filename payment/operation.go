package payment

import (
	"context"
	"fmt"
	"time"

	"chargeonce/metrics"
)

// The attempt engine and the kinds that plug into it. Every kind of
// attempt (a charge, a refund, …) is claimed, leased, performed, settled,
// reconciled, answered and forgotten by the same engine: perform.go,
// settle.go, lease.go, result.go, finished.go, reconciler.go and the
// store's attempts (store_attempt.go). The engine never asks what kind it
// runs: it asks the kind's operation, looked up by the attempt's Kind.
// A kind is its Terms, its operation, its claim (the entry point that
// reserves what it needs and inserts the key), its row conversion in the
// store, and one registration:
//
//	func init() { register(KindX, func(s *Service) operation { return xOperation{s} }) }

// operation is what an attempt's kind does at the provider and in the
// record.
type operation interface {
	// send sends a's operation to the provider under a's provider key.
	// The provider deduplicates on the key, so a second send of the same
	// attempt gets the first one's answer. An error wrapping
	// ErrOutcomeUnknown means nobody knows yet.
	send(ctx context.Context, m Merchant, a Attempt) (outcome, error)
	// read reads what the provider holds for a, without sending anything;
	// nil when it holds nothing.
	read(ctx context.Context, m Merchant, a Attempt) (*outcome, error)
	// record records the provider's definitive answer o (succeeded or
	// failed) on a, fenced on a's fence, with its event, in one
	// transaction, and returns a as recorded; errFenced when another
	// holder finalized or took a over. now is when it is recorded,
	// expiresAt when its result may be forgotten.
	record(ctx context.Context, a Attempt, o outcome, now, expiresAt time.Time) (Attempt, error)
	// unseen says what becomes of a, which the provider never showed,
	// age after its claim and past the redrive window: failed, with the
	// message its failure says, or only read from now on (pend), while a
	// send may still land.
	unseen(a Attempt, age time.Duration) (fail bool, message string)
	// providerID is the provider's id of what a's success recorded.
	providerID(a Attempt) string
	// answer puts what a's success made into r.
	answer(a Attempt, r *Result)
	// settled reports whether finished attempt a can never change again,
	// so that a replay may answer it from memory.
	settled(a Attempt) bool
	// recheck reads the provider about a, which is not waiting for the
	// shopper, because the provider said it changed (Recheck).
	recheck(ctx context.Context, m Merchant, a Attempt) (Status, error)
	// observe counts a's finalization as outcome ("succeeded", "failed"),
	// by its holder.
	observe(a Attempt, o outcome, by holder, now time.Time)
}

// abandoner is an operation whose attempts may wait for the shopper: it
// cancels a's payment o at the provider once nobody authenticated within
// the window, and returns the payment as it then is.
type abandoner interface {
	abandon(ctx context.Context, m Merchant, a Attempt, o outcome) (outcome, error)
}

// operations are the registered kinds, each made for a Service.
var operations = map[Kind]func(*Service) operation{}

// register registers kind's operation; each kind's file does, once.
func register(kind Kind, op func(*Service) operation) {
	if _, ok := operations[kind]; ok {
		panic(fmt.Sprintf("payment: kind %q registered twice", kind))
	}
	operations[kind] = op
}

// op is the operation of a's kind.
func (s *Service) op(a Attempt) operation {
	op, ok := s.ops[a.Kind]
	if !ok {
		panic(fmt.Sprintf("payment: attempt %s of unregistered kind %q", a.ID, a.Kind))
	}
	return op
}

// outcomeState is where the provider says an operation stands.
type outcomeState int

const (
	// outcomeSucceeded: made; final.
	outcomeSucceeded outcomeState = iota + 1
	// outcomeFailed: refused or declined; final, nothing made.
	outcomeFailed
	// outcomePending: accepted, not final yet: only ever read again.
	outcomePending
	// outcomeWaiting: waits for the shopper (Action): only ever read again.
	outcomeWaiting
)

// outcome is the provider's word on an attempt, whatever its kind.
type outcome struct {
	// ProviderID is the provider's id of what it made (or refused).
	ProviderID string
	State      outcomeState
	Failure    Failure         // when failed
	Action     *ProviderAction // when waiting
	// detail is the kind's own reading of the answer (a charge's
	// duplicates and authorization), which only its operation reads.
	detail any
}

func (o outcome) succeeded() bool { return o.State == outcomeSucceeded }

// failedOutcome is a failure of code with message, as the engine records
// one the provider never answered.
func failedOutcome(code, message string) outcome {
	return outcome{State: outcomeFailed, Failure: Failure{Code: code, Message: message}}
}

// outcomeLabel names o's final state in the metrics.
func outcomeLabel(o outcome) string {
	if o.succeeded() {
		return metrics.BySucceeded
	}
	return metrics.ByFailed
}
