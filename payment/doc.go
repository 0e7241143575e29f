// Package payment is chargeonce's domain: it charges a card at most once
// per idempotency key. A request first claims its key in PostgreSQL (an
// atomic insert on a unique index), and only the holder of the claim calls
// the card provider, with an idempotency key of our own (the provider
// key); the outcome is stored, and every later request with the same key
// gets the stored result. The package holds that flow, the validation and
// fingerprint of requests, the Provider interface that the adapters under
// provider/ implement (with its instrumentation), the reconciler and the
// retention cleaner, and the domain's types and errors that the merchants,
// the live status and the GraphQL layer share.
//
// # An attempt's life
//
// An attempt is one row of charge_attempts: a merchant's claim of an
// idempotency key, for an operation of one kind (a charge, a refund…).
// Its status is PROCESSING, SUCCEEDED or FAILED, and while it is
// PROCESSING one holder at a time owns it under a lease (locked_until) and
// a fence (the count of its holders), which every write of a holder is
// fenced on. The engine below runs every kind alike; a kind plugs in with
// its operation (operation.go), its terms, its claim and its store file:
//
//	claim ──► PROCESSING, held ─── finalize ───► SUCCEEDED or FAILED ─── retention ───► forgotten
//	          (fence n, lease)                    ▲                                 (the charge stays)
//	             │          ▲                     │
//	  lease ends │          │ takeover            │ settle, by the new holder: the provider's
//	 or released │          │ (fence n+1), by     │ answer, a redrive under the same key, a new
//	             ▼          │ the reconciler or   │ key for a spent one, or the give-up after
//	      PROCESSING, stuck ┘ a retry ────────────┘ the redrive window; or, still unknown, a
//	                                                release: stuck again
//
// Where each transition is written:
//
//   - claim: each kind's own (Service.ChargeCard, chargecard.go, with
//     store.claim, one INSERT … ON CONFLICT DO NOTHING RETURNING that also
//     reads a stored attempt; Service.RefundCharge, refund.go, which
//     reserves the refunded money in the claim's transaction).
//   - lease: newAttempt (attempt.go) gives the claim its lease; a holder
//     that leaves the outcome unknown, or cannot know whether its claim
//     committed, releases it early (Service.release, lease.go;
//     store.release), and the attempt is stuck at once.
//   - provider call: Service.perform and callProvider (perform.go) send
//     the kind's operation, with inline retries under the same provider
//     key; the request's provider phase ends at half the lease.
//   - finalize: Service.finalize (perform.go) and the kind's record: one
//     transaction that records what it made, finalizes the attempt and
//     writes its event to the outbox, fenced on the fence.
//   - takeover: the reconciler (reconciler.go, Service.takeStuck,
//     store.takeStuck) takes stuck attempts in batches; a retry that finds
//     its attempt stuck takes it over at once (answerRetry, claim.go;
//     store.takeOver). Either bumps the fence, which fences off
//     the holder before it.
//   - settle, redrive, rekey, give up: Service.settle (settle.go) reads the
//     provider through the kind's operation (a charge finds every charge of
//     the attempt and settles on one: settleOn, duplicate.go), sends what
//     the provider never saw again under the same key until the redrive
//     window ends (RedriveWindow), records a new provider key only when the
//     provider says the old one is spent (Service.rekey, store.rekey), and
//     after the window fails the attempt as provider_unavailable, or only
//     reads it while a send may still land, as its kind says (unseen).
//   - retention: the Cleaner (retention.go, store.deleteExpired) forgets
//     finished attempts once their result expires; a PROCESSING attempt is
//     never deleted, and the charges are kept.
//
// The answers (result.go) are fresh for the holder that just worked on an
// attempt and replays for everyone else; finished attempts are replayed
// from memory (finished.go).
package payment
