package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/db"
	"chargeonce/loop"
	"chargeonce/payment"
	"chargeonce/tracing"
)

// RelayConfig tunes a Relay. Zero values take the defaults.
type RelayConfig struct {
	// Replicas of the stream, which the relay creates when missing.
	Replicas int
	// Batch is how many events one transaction publishes, default 256.
	Batch int
	// Poll is the fallback: how often the relay looks for unsent events
	// when no NOTIFY woke it, default 1s.
	Poll time.Duration
	// Gather is how long the relay lets events gather after a batch before
	// it takes the next, default 20ms: under load a transaction then carries
	// many events rather than one per charge, and no event waits longer
	// than this for it.
	Gather time.Duration
	// AckTimeout bounds the wait for the broker's acks, default 5s.
	AckTimeout time.Duration
	// MaxBackoff bounds the wait between tries while the broker or the
	// database is away, default 5s.
	MaxBackoff time.Duration
	Logger     *slog.Logger
	// Fault is called at FaultAfterPublish, for crash tests.
	Fault func(point string)
	// Published counts events by whether the stream already had them.
	Published func(duplicate bool)
	// Passes is told of each pass Run finishes, with the number of events
	// it sent as the Result (a test signal); nil tells nobody.
	Passes *loop.Passes
}

func (c RelayConfig) withDefaults() RelayConfig {
	c.Batch = cmp.Or(c.Batch, 256)
	c.Poll = cmp.Or(c.Poll, time.Second)
	c.Gather = cmp.Or(c.Gather, 20*time.Millisecond)
	c.AckTimeout = cmp.Or(c.AckTimeout, 5*time.Second)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Fault == nil {
		c.Fault = func(string) {}
	}
	if c.Published == nil {
		c.Published = func(bool) {}
	}
	return c
}

// Relay publishes the outbox to the CHARGES stream. In the relays' turn (a
// transaction's advisory lock) it reads the oldest unsent events, publishes
// them with the event id as Nats-Msg-Id, waits for the broker's acks, and
// marks the acked ones sent in the same transaction; so several relays (one
// per instance) share the outbox without publishing an event twice, and a
// relay that dies before its commit leaves the events unsent, to be
// published again (the stream's duplicate window, then the consumers'
// deduplication, absorb the repeat). Wake, right after an event commits on this instance, and a
// notice from another instance (Notifier) wake it within milliseconds; a
// poll is the fallback.
type Relay struct {
	wake   chan struct{}
	pool   *pgxpool.Pool
	store  *store
	js     jetstream.JetStream
	cfg    RelayConfig
	log    *slog.Logger
	stream bool // the stream is known to exist
}

// NewRelay returns a relay from pool's outbox to js.
func NewRelay(pool *pgxpool.Pool, js jetstream.JetStream, cfg RelayConfig) *Relay {
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("component", "relay")
	return &Relay{wake: make(chan struct{}, 1), pool: pool, store: &store{pool: pool, log: log}, js: js, cfg: cfg, log: log}
}

// Wake has the relay look at once: an event committed. It never blocks; a
// wake already pending covers this one.
func (r *Relay) Wake() { loop.Signal(r.wake) }

// Run relays until ctx ends: at once, whenever Wake or another instance's
// notice says an event was written, and every Poll; after a batch it lets
// the next events gather for Gather, and while the broker or the database
// is away it tries again with a growing wait, up to MaxBackoff.
func (r *Relay) Run(ctx context.Context) {
	go listen(ctx, r.pool, r.log, r.wake)
	loop.Runner{Name: "relay", Interval: r.cfg.Poll, Wake: r.wake, Logger: r.log, Passes: r.cfg.Passes,
		Backoff: loop.Backoff{Min: 100 * time.Millisecond, Max: r.cfg.MaxBackoff},
		Outage:  func(err error) bool { return errors.Is(err, errNoBroker) || db.IsUnavailable(err) },
	}.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		sent, err := r.drain(ctx)
		if err != nil {
			return loop.Next{Result: sent}, fmt.Errorf("events wait in the outbox: %w", err)
		}
		if sent > 0 {
			// Let the next events gather; their wakes wait in wake.
			return loop.Next{Rest: r.cfg.Gather, Result: sent}, nil
		}
		return loop.Next{Result: sent}, nil
	})
}

// drain relays batches until a batch finds fewer unsent events than it
// could take, and says how many it sent.
func (r *Relay) drain(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := r.RelayOnce(ctx)
		total += n
		if err != nil || n < r.cfg.Batch {
			return total, err
		}
	}
}

// RelayOnce publishes one batch and says how many events the broker took.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	if !r.stream {
		if _, err := EnsureStream(ctx, r.js, r.cfg.Replicas); err != nil {
			return 0, fmt.Errorf("%w: %w", errNoBroker, err)
		}
		r.stream = true
	}
	sent, pubErr, err := r.store.relayBatch(ctx, r.cfg.Batch, func(events []outboxEvent) ([]uuid.UUID, error) {
		acked, err := r.publish(ctx, events)
		if len(acked) > 0 {
			r.cfg.Fault(FaultAfterPublish)
		}
		return acked, err
	})
	if err != nil {
		return 0, err
	}
	if pubErr != nil {
		r.stream = false // it may have been deleted: make sure on the next try
	}
	return sent, pubErr
}

// publish publishes rows asynchronously and waits for their acks; it
// returns the ids the broker acknowledged. Each event's publication is a
// span (relay.publish) in the trace of the write that made it, and its
// message carries that trace in its traceparent and tracestate headers.
func (r *Relay) publish(ctx context.Context, rows []outboxEvent) ([]uuid.UUID, error) {
	futures := make([]jetstream.PubAckFuture, 0, len(rows))
	spans := make([]trace.Span, 0, len(rows))
	defer func() {
		for _, s := range spans {
			s.End()
		}
	}()
	var firstErr error
	for _, row := range rows {
		_, span := tracer.Start(tracing.ContextFrom(ctx, row.traceparent, row.tracestate), "relay.publish",
			trace.WithSpanKind(trace.SpanKindProducer))
		if span.IsRecording() {
			span.SetAttributes(attribute.String("chargeonce.event_type", row.eventType), attribute.String("chargeonce.event_id", row.id.String()))
		}
		spans = append(spans, span)
		msg := &nats.Msg{Subject: subjectOf(row.eventType), Data: row.body, Header: nats.Header{}}
		tracing.Propagator.Inject(trace.ContextWithSpan(ctx, span), propagation.HeaderCarrier(msg.Header))
		f, err := r.js.PublishMsgAsync(msg, jetstream.WithMsgID(row.id.String()), jetstream.WithExpectStream(Stream))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			firstErr = fmt.Errorf("%w: publish: %w", errNoBroker, err)
			break
		}
		futures = append(futures, f)
	}
	timeout := time.NewTimer(r.cfg.AckTimeout)
	defer timeout.Stop()
	acked := make([]uuid.UUID, 0, len(futures))
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			acked = append(acked, rows[i].id)
			r.cfg.Published(ack.Duplicate)
		case err := <-f.Err():
			spans[i].SetStatus(codes.Error, err.Error())
			firstErr = cmp.Or(firstErr, fmt.Errorf("%w: %w", errNoBroker, err))
		case <-timeout.C:
			return acked, cmp.Or(firstErr, fmt.Errorf("%w: no ack within %s", errNoBroker, r.cfg.AckTimeout))
		case <-ctx.Done():
			return acked, ctx.Err()
		}
	}
	return acked, firstErr
}

// tracer is the relay's: its spans are the events' publications.
var tracer = tracing.Tracer("relay")

func subjectOf(eventType string) string { return payment.SubjectPrefix + eventType }

// CountUnsent counts the outbox events the broker has not acknowledged.
func CountUnsent(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	return newStore(pool).countUnsent(ctx)
}
