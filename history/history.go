// Package history keeps what happened under each attempt's key, so that
// "was I charged twice?" has an answer through the API (chargeHistory) and
// the command line (charges show): the requests that reached the key, the
// provider calls, the changes of holder, the shopper's wait, the event and
// its delivery.
//
// It is append-only. The rows that the ledger's own writes imply (a
// takeover, a release, a finalizing write by anyone but the claim's
// holder, the webhook worker's) are written by those statements and
// transactions, so they cost no commit of their own and are never lost
// when they are not.
// The rest, which change nothing in the ledger (a replay, a PROCESSING
// answer, a refusal, a provider call that ends in no write), go to the
// instance's Recorder, which batches them into one write every
// FlushInterval and at shutdown; a process killed outright loses at most
// its last interval of those. Replays and PROCESSING answers are counted,
// not listed: a storm of ten thousand is one row with its count.
//
// A fresh charge writes no row at all: who claimed its attempt is a column
// of the attempt's row (claim_source, which the claim writes anyway), and
// the rest of its history is read from the ledger (List): the send its
// claim allowed, the answer and the result of the finalizing write, the
// event and its publication.
//
// A row never holds card data, secrets or a checkout session's client
// secret: details are written here, by the types below, from what is safe
// to show a support desk.
package history

import (
	"context"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"chargeonce/request"
)

// The types of history rows.
const (
	// The requests that reached a key.
	Claimed    = "request.claimed"    // the first: it claimed the key
	Processing = "request.processing" // counted: retries answered PROCESSING
	Replayed   = "request.replayed"   // counted: retries answered the stored result
	Mismatch   = "request.mismatch"   // IDEMPOTENCY_KEY_REUSED: Detail names the fields that differed
	Refused    = "request.refused"    // refused before any claim (Detail: the code and why)

	// The provider calls.
	ProviderSent     = "provider.sent"     // written with the write that lets its holder send
	ProviderAnswered = "provider.answered" // its outcome and latency
	ProviderLost     = "provider.lost"     // no answer: a timeout, a closed connection
	ProviderRead     = "provider.read"     // read back (a retry, the reconciler): what the provider holds

	// The holders of the attempt.
	LeaseEnded    = "lease.ended"      // its holder's lease ran out (at: when)
	LeaseTaken    = "lease.taken_over" // by the reconciler or a retry: a new holder, a new fence
	LeaseReleased = "lease.released"   // its holder let it go early, the outcome unknown
	FenceRefused  = "fence.refused"    // a holder's write refused: someone else held it

	// The shopper's wait, the end, and after.
	WaitStarted = "shopper.wait_started" // 3-D Secure: the shopper is sent to the bank
	WaitEnded   = "shopper.returned"     // the provider says the shopper finished
	Abandoned   = "shopper.abandoned"    // nobody authenticated within the window
	Finalized   = "attempt.finalized"    // SUCCEEDED or FAILED, by whom; Detail: until when it is kept
	Pending     = "attempt.pending"      // the provider holds it, not final yet: read from now on

	// The event and its delivery.
	EventWritten   = "event.written"     // to the outbox, with the write that caused it
	EventPublished = "event.published"   // on the stream
	WebhookAttempt = "webhook.attempted" // one attempt at the merchant's endpoint, its status
)

// Counted are the types counted rather than listed.
func Counted(typ string) bool { return typ == Processing || typ == Replayed }

// Key names the key a row is about: a merchant's key of one kind, and the
// attempt under it (uuid.Nil for a request refused before any attempt).
type Key struct {
	MerchantID     uuid.UUID
	Kind           string
	IdempotencyKey string
	AttemptID      uuid.UUID
}

// Entry is one thing that happened, to write. The entries one write
// makes about one attempt are one row (their source is the first's).
type Entry struct {
	Key
	At     time.Time
	Type   string
	Detail string
	// Status is the attempt's status after it, set only where it becomes
	// final (attempt.finalized); a read infers the others (Event.Status).
	Status string
	Source
}

// Source is who wrote a row: the request (its id and its trace, both ""
// for a background pass outside any trace) and the instance.
// A claim's source is kept on its attempt's row, as JSON (SourceJSON).
type Source struct {
	RequestID string `json:"request_id,omitempty"`
	TraceID   string `json:"trace_id,omitempty"`
	SpanID    string `json:"span_id,omitempty"`
	Instance  string `json:"instance,omitempty"`
}

// SourceOf is ctx's request and trace, written by instance.
func SourceOf(ctx context.Context, instance string) Source {
	src := Source{RequestID: request.ID(ctx), Instance: instance}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		src.TraceID, src.SpanID = sc.TraceID().String(), sc.SpanID().String()
	}
	return src
}

// Event is one entry as it is read: what chargeHistory answers.
type Event struct {
	At        time.Time
	Type      string
	RequestID string
	TraceID   string
	SpanID    string
	Instance  string
	Detail    string
	// Status is the attempt's status after it: PROCESSING until an entry
	// finalized it; "" for a request refused before any attempt.
	Status string
	// Count is how many requests a counted row stands for (1 otherwise),
	// from At to LastAt.
	Count     int
	LastAt    time.Time
	AttemptID uuid.UUID
}
