package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/history"
	"chargeonce/sqlc"
)

// store is the one seam between the payment flow and PostgreSQL: it runs
// the sqlc queries and turns their errors into the domain's, and their rows
// into Attempts (store_attempt.go). Nothing above it imports pgx.
type store struct {
	pool *pgxpool.Pool
	q    *sqlc.Queries
	// committed is told of the outbox events of each transaction once it
	// commits (Config.EventsCommitted); nil: nobody is.
	committed func([]Event)
	// hist names the instance in the history rows the store writes.
	hist *history.Recorder
	// claims and recordings write the claims of charges off checkout
	// sessions and the recordings of plain charges, together when they
	// wait for a connection together (batcher).
	claims     *claims
	recordings *recordings
}

func newStore(pool *pgxpool.Pool) *store {
	return &store{pool: pool, q: sqlc.New(pool), claims: newClaims(pool), recordings: newRecordings(pool)}
}

// txQueries are the queries of one transaction, with the outbox events it
// wrote (insertEvent).
type txQueries struct {
	*sqlc.Queries
	events []Event
	// history is the rows the transaction writes before it commits.
	history []history.Entry
}

// inTx runs fn in a transaction, and once it commits tells s.committed of
// the events fn wrote: the events' own wake-up, in place of a NOTIFY in
// the writing transaction (whose commit would take PostgreSQL's one lock
// on the notification queue, and so serialize every commit of an event).
func (s *store) inTx(ctx context.Context, fn func(q *txQueries) error) error {
	var q *txQueries
	ride := ridingOf(ctx)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q = &txQueries{Queries: s.q.WithTx(tx)}
		if err := fn(q); err != nil {
			return err
		}
		rows := q.history
		if ride != nil {
			rows = append(rows, ride.entries...)
		}
		if len(rows) == 0 {
			return nil
		}
		return q.InsertHistory(ctx, history.InsertParams(rows))
	})
	if err == nil {
		s.announce(q.events)
		if ride != nil {
			ride.written = true
		}
	}
	return err
}

// announce tells s.committed of evs, which just committed.
func (s *store) announce(evs []Event) {
	if len(evs) > 0 && s.committed != nil {
		s.committed(evs)
	}
}

// Constraints the store tells apart, by the names the migrations give them.
const (
	constraintProviderChargeID = "charges_provider_charge_id_unique" // one charge row per provider charge
	constraintAttemptOrder     = "charge_attempts_order_idx"         // one live attempt per order
	constraintChargeOrder      = "charges_order_idx"                 // one charge per order
	constraintAttemptSession   = "charge_attempts_session_idx"       // one live attempt per checkout session
	constraintProviderRefundID = "refunds_provider_refund_id_unique" // one refund row per provider refund
)

// errOrderPaid refuses a second payment of an order; errFenced is a
// finalizing write that found the attempt already finalized or taken over.
var (
	errOrderPaid = &Error{Code: EORDERPAID, Field: "input.orderId",
		Message: "this order is already paid, or being paid, under another idempotency key; nothing was charged"}
	errFenced = errors.New("attempt was finalized or taken over by someone else")
)

// interpretError is the store's seam: it turns a database error into the
// domain's (see DBError), and a second live attempt or charge for an order
// into errOrderPaid.
func interpretError(err error) error {
	if kind, constraint := db.Classify(err); kind == db.UniqueViolation {
		if constraint == constraintAttemptOrder || constraint == constraintChargeOrder {
			return errOrderPaid
		}
		if constraint == constraintAttemptSession {
			return errSessionPaid
		}
		return fmt.Errorf("unique violation on %s: %w", constraint, err)
	}
	return DBError(err)
}

func (s *store) merchant(ctx context.Context, id uuid.UUID) (Merchant, error) {
	m, err := s.q.GetMerchant(ctx, id)
	return Merchant{ID: m.ID, Name: m.Name}, interpretError(err)
}

// historyArgs are notes as the row that a statement writes itself (a
// history CTE): when (the first note's time), the entries' JSON (an empty
// array writes no row), and who wrote them, the first note's source, as
// every note of one write is by one writer.
type historyArgs struct {
	at      time.Time
	entries []byte
	src     history.Source
}

func argsOf(notes []history.Entry) historyArgs {
	h := historyArgs{entries: history.EntriesJSON(notes)}
	if len(notes) > 0 {
		h.at, h.src = notes[0].At, notes[0].Source
	}
	return h
}
