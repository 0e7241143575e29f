package webhook

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/payment"
	"chargeonce/sqlc"
	"chargeonce/tracing"
)

// store is the seam between the webhook domain and PostgreSQL: it runs the
// sqlc queries and turns their rows into the package's types.
type store struct {
	pool *pgxpool.Pool
	q    *sqlc.Queries
	// instance names this instance in the history rows it writes.
	instance string
}

// newStore is the store on pool of the instance named instance.
func newStore(pool *pgxpool.Pool, instance string) *store {
	return &store{pool: pool, q: sqlc.New(pool), instance: instance}
}

// errNotFound is a missing row; errDeliveryGone an attempt whose delivery
// was deleted while it was sent (its endpoint was removed).
var (
	errNotFound     = errors.New("not found")
	errDeliveryGone = errors.New("the delivery was deleted: its endpoint was removed")
)

// webhookError is the store's seam: it turns a database error into the
// package's (see db.Classify).
func webhookError(err error) error {
	switch kind, constraint := db.Classify(err); {
	case kind == db.NotFound:
		return errNotFound
	case kind == db.ForeignKeyViolation && constraint == constraintAttemptDelivery:
		return errDeliveryGone
	}
	return err
}

// constraintAttemptDelivery ties an attempt to its delivery; the store tells
// a removed endpoint's attempt by it.
const constraintAttemptDelivery = "webhook_attempts_delivery_fkey"

// States of a delivery.
const (
	statePending   = "pending"
	stateDelivered = "delivered"
	stateFailed    = "failed"
)

func (s *store) merchantID(ctx context.Context, name string) (uuid.UUID, error) {
	m, err := s.q.GetMerchantByName(ctx, name)
	return m.ID, webhookError(err)
}

func (s *store) upsertEndpoint(ctx context.Context, merchantID uuid.UUID, url string, sec secret, now time.Time) (Endpoint, error) {
	r, err := s.q.UpsertWebhookEndpoint(ctx, sqlc.UpsertWebhookEndpointParams{
		ID: uuid.New(), MerchantID: merchantID, Url: url, Secret: string(sec), Now: now,
	})
	return Endpoint{ID: r.ID, MerchantID: r.MerchantID, URL: r.Url, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt},
		webhookError(err)
}

func (s *store) endpoints(ctx context.Context) ([]Endpoint, error) {
	rows, err := s.q.ListWebhookEndpoints(ctx)
	es := make([]Endpoint, len(rows))
	for i, r := range rows {
		es[i] = Endpoint{ID: r.ID, MerchantID: r.MerchantID, Merchant: r.MerchantName, URL: r.Url,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	}
	return es, webhookError(err)
}

func (s *store) endpointOfMerchant(ctx context.Context, merchantID uuid.UUID) (Endpoint, error) {
	r, err := s.q.GetWebhookEndpointOfMerchant(ctx, merchantID)
	return Endpoint{ID: r.ID, MerchantID: r.MerchantID, Merchant: r.MerchantName, URL: r.Url,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, webhookError(err)
}

// deleteEndpoint removes the merchant's endpoint with its deliveries, and
// says how many of them were pending.
func (s *store) deleteEndpoint(ctx context.Context, merchantID uuid.UUID) (url string, pending int, err error) {
	r, err := s.q.DeleteWebhookEndpoint(ctx, merchantID)
	return r.Url, int(r.Pending), webhookError(err)
}

// insertDelivery queues e, whose JSON is body, for its merchant's endpoint;
// false: the merchant has none, or the event is queued already.
func (s *store) insertDelivery(ctx context.Context, e payment.Event, body []byte, now time.Time) (bool, error) {
	p := sqlc.InsertWebhookDeliveryParams{EventID: e.ID, EventType: e.Type, Body: body, Now: now, MerchantID: e.MerchantID}
	// The event's trace, which each attempt continues.
	p.Traceparent, p.Tracestate = tracing.Traceparent(ctx)
	n, err := s.q.InsertWebhookDelivery(ctx, p)
	return n > 0, webhookError(err)
}

// delivery is a delivery a worker took: what to send, where, and with which
// secret, for its attempt number attempt.
type delivery struct {
	eventID    uuid.UUID
	endpointID uuid.UUID
	merchantID uuid.UUID
	eventType  string
	body       []byte
	attempt    int
	queuedAt   time.Time
	url        string
	secret     secret
	// traceparent and tracestate are the event's trace; "" for none.
	traceparent, tracestate string
}

// takeDue leases up to limit due deliveries, at most one per endpoint and
// none of the busy endpoints'.
func (s *store) takeDue(ctx context.Context, now, leaseUntil time.Time, busy []uuid.UUID, limit int) ([]delivery, error) {
	if busy == nil {
		busy = []uuid.UUID{} // an array, not NULL, for <> ALL
	}
	rows, err := s.q.TakeDueWebhookDeliveries(ctx, sqlc.TakeDueWebhookDeliveriesParams{
		Now: now, LeaseUntil: leaseUntil, BusyEndpoints: busy, MaxDeliveries: int32(limit),
	})
	ds := make([]delivery, len(rows))
	for i, r := range rows {
		ds[i] = delivery{eventID: r.EventID, endpointID: r.EndpointID, merchantID: r.MerchantID, eventType: r.EventType,
			body: r.Body, attempt: int(r.Attempts), queuedAt: r.CreatedAt, url: r.Url, secret: secret(r.Secret),
			traceparent: deref(r.Traceparent), tracestate: deref(r.Tracestate)}
	}
	return ds, webhookError(err)
}

// outcome is what an attempt came to, as the store records it: the attempt
// log's row, and the delivery's next state (delivered, failed, or pending
// with its next attempt at next).
type outcome struct {
	startedAt  time.Time
	duration   time.Duration
	httpStatus int    // 0: no answer
	errText    string // "" for an answer
	state      string
	next       time.Time // for statePending
	now        time.Time
}

// record writes an attempt's log row and its delivery's new state in one
// transaction. false: the worker's lease had run out and someone else took
// the delivery, so only the log row was written.
func (s *store) record(ctx context.Context, d delivery, o outcome) (bool, error) {
	var current bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		p := sqlc.InsertWebhookAttemptParams{
			EventID: d.eventID, EndpointID: d.endpointID, Attempt: int32(d.attempt),
			StartedAt: o.startedAt, DurationUs: o.duration.Microseconds(), Instance: s.instance,
		}
		if o.httpStatus != 0 {
			p.HttpStatus = new(int32(o.httpStatus))
		}
		if o.errText != "" {
			p.Error = new(o.errText)
		}
		if err := q.InsertWebhookAttempt(ctx, p); err != nil {
			return err
		}
		var n int64
		var err error
		if o.state == statePending {
			n, err = q.RetryWebhookDelivery(ctx, sqlc.RetryWebhookDeliveryParams{
				NextAttemptAt: o.next, EventID: d.eventID, EndpointID: d.endpointID, Attempt: int32(d.attempt),
			})
		} else {
			n, err = q.FinishWebhookDelivery(ctx, sqlc.FinishWebhookDeliveryParams{
				State: o.state, Now: o.now, EventID: d.eventID, EndpointID: d.endpointID, Attempt: int32(d.attempt),
			})
		}
		current = n == 1
		return err
	})
	return current, webhookError(err)
}

func (s *store) deliveryLog(ctx context.Context, endpointID uuid.UUID, limit int) ([]LogEntry, error) {
	rows, err := s.q.ListWebhookDeliveryLog(ctx, sqlc.ListWebhookDeliveryLogParams{EndpointID: endpointID, MaxRows: int32(limit)})
	es := make([]LogEntry, len(rows))
	for i, r := range rows {
		e := LogEntry{EventID: r.EventID, EventType: r.EventType, State: r.State, QueuedAt: r.CreatedAt}
		if r.State == statePending {
			e.NextAttemptAt = r.NextAttemptAt
		}
		if r.Attempt != nil {
			e.Attempt = int(*r.Attempt)
			e.StartedAt = *r.StartedAt
			e.Duration = time.Duration(*r.DurationUs) * time.Microsecond
		}
		if r.HttpStatus != nil {
			e.HTTPStatus = int(*r.HttpStatus)
		}
		if r.Error != nil {
			e.Error = *r.Error
		}
		es[i] = e
	}
	return es, webhookError(err)
}

func (s *store) countPending(ctx context.Context) (int, error) {
	n, err := s.q.CountPendingWebhookDeliveries(ctx)
	return int(n), webhookError(err)
}

// deleteFinished forgets up to limit deliveries that ended before before.
func (s *store) deleteFinished(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := s.q.DeleteFinishedWebhookDeliveries(ctx, sqlc.DeleteFinishedWebhookDeliveriesParams{
		Before: before, MaxDeliveries: int32(limit),
	})
	return int(n), webhookError(err)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
