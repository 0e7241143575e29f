package events

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/payment"
	"chargeonce/sqlc"
)

// store is the seam between the events and PostgreSQL: the outbox the
// relay drains and the receipts table the reference consumer fills. It is
// the package's only code that runs the sqlc queries.
type store struct {
	pool *pgxpool.Pool
	log  *slog.Logger // what the relay's batches have to say (its queue restored)
}

func newStore(pool *pgxpool.Pool) *store {
	return &store{pool: pool, log: slog.New(slog.DiscardHandler)}
}

// outboxEvent is an unsent event as the relay publishes it.
type outboxEvent struct {
	id        uuid.UUID
	eventType string
	body      []byte
	// traceparent and tracestate are its writer's trace context; "" for
	// none.
	traceparent, tracestate string
}

// relayTx begins the relay's transaction, in one round trip.
//
// Relays take turns: the transaction first waits for the relays' advisory
// lock (relayLock), which it holds until it ends, so a relay reads the
// queue only once the one before it has committed what it sent, and reads
// it in a statement of its own, with a snapshot taken after that commit.
// No queued row is locked: a row lock wrote a WAL record for each event
// (56 B of a fresh charge's), an advisory lock writes none. One relay at a
// time drains an outbox faster than a machine's charges fill it (a batch
// reads its events in microseconds each), and a relay that finds the lock
// taken waits rather than skipping its turn, so the events it was woken
// for go in the next batch, not at its next poll.
//
// Its statements are planned for the outbox as it is at each batch (custom
// plans), never by a plan its connection cached earlier. A plan cached
// while the outbox held a few events, as a new deployment's relay first
// finds it, scans it sequentially, and keeps doing so over thousands until
// autovacuum next analyzes it (in make bench, whose database is new in
// each run, the relay's two statements took a quarter of PostgreSQL's CPU
// for fresh charges that way). Planning a batch costs a fraction of a
// millisecond, shared by its events.
var relayTx = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL plan_cache_mode = force_custom_plan; " +
	"SELECT pg_advisory_xact_lock(" + strconv.FormatInt(relayLock, 10) + ")"}

// relayLock is the key of the relays' advisory lock: "co-relay" in ASCII.
const relayLock int64 = 0x636f2d72656c6179

// relayBatch reads up to limit of the oldest unsent events, in the relays'
// turn (relayTx), once it has queued them all again if a crash emptied the
// queue (RestoreChargeEventsQueue: the queue is an unlogged table); makes
// sure they are durable (see durable), hands them to publish, and marks
// sent, in the same transaction, the ids publish says the broker took.
// publish's own error is returned apart from the store's, since the events
// it did publish are marked all the same.
func (s *store) relayBatch(ctx context.Context, limit int, publish func([]outboxEvent) ([]uuid.UUID, error)) (sent int, pubErr, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, relayTx, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		restored, err := q.RestoreChargeEventsQueue(ctx)
		if err != nil {
			return err
		}
		if restored > 0 {
			s.log.Warn("the relay's queue was emptied (by PostgreSQL's crash recovery or a standby's promotion): "+
				"the events the broker has not taken are queued again", "events", restored)
		}
		rows, err := q.UnsentChargeEvents(ctx, int32(limit))
		if err != nil || len(rows) == 0 {
			return err
		}
		if err := s.durable(ctx); err != nil {
			return err
		}
		events := make([]outboxEvent, len(rows))
		for i, r := range rows {
			events[i] = outboxEvent{id: r.ID, eventType: r.Type, body: r.Body,
				traceparent: deref(r.Traceparent), tracestate: deref(r.Tracestate)}
		}
		var acked []uuid.UUID
		acked, pubErr = publish(events)
		if len(acked) == 0 {
			return nil
		}
		sent = len(acked)
		return q.MarkChargeEventsSent(ctx, sqlc.MarkChargeEventsSentParams{Now: time.Now(), Ids: acked})
	})
	if err != nil {
		return 0, pubErr, err
	}
	return sent, pubErr, nil
}

// durable returns once every commit the relay can see is on the
// synchronous standby, if there is one: it commits a transaction of its own
// that writes one WAL record and nothing else (a transactional logical
// decoding message, which no table holds; a transaction that writes no WAL
// would not wait), whose commit waits for the standby to flush the WAL up
// to it, and so past the commits of the events just read. A commit
// is visible on the primary before its standby has it when its wait was
// cut short (a client that cancelled while waiting, or the standby set
// aside by pg_auto_failover): publishing such an event would announce an
// outcome that a failover then rewinds, and announce it twice once it is
// finalized again. Without a standby it is one local commit per batch.
func (s *store) durable(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(true, 'chargeonce.relay', '')")
		return err
	})
}

func (s *store) countUnsent(ctx context.Context) (int, error) {
	n, err := sqlc.New(s.pool).CountUnsentChargeEvents(ctx)
	return int(n), err
}

// errForeignMerchant is an event whose merchant is not in this database.
var errForeignMerchant = errors.New("the event's merchant is not in this database")

// insertReceipt issues the receipt of e, a charge.succeeded event, in one
// transaction; false when e has its receipt already (a redelivery), and
// errForeignMerchant when e is another database's.
func (s *store) insertReceipt(ctx context.Context, e payment.Event) (bool, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		n, err = sqlc.New(tx).InsertReceipt(ctx, receiptOf(e))
		return err
	})
	if kind, _ := db.Classify(err); kind == db.ForeignKeyViolation {
		return false, errForeignMerchant
	}
	return n > 0, err
}

func receiptOf(e payment.Event) sqlc.InsertReceiptParams {
	p := sqlc.InsertReceiptParams{
		EventID: e.ID, MerchantID: e.MerchantID, ChargeID: e.Charge.ID, IdempotencyKey: e.IdempotencyKey,
		Amount: e.Amount, Currency: e.Currency, ProviderChargeID: e.Charge.ProviderChargeID, ChargedAt: e.Charge.CreatedAt,
	}
	if e.OrderID != "" {
		p.OrderID = &e.OrderID
	}
	return p
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
