package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/propagation"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/payment"
	"chargeonce/tracing"
)

// Consumer is a durable JetStream consumer of the CHARGES stream whose
// handler makes each event's effect exactly once: it records the effect
// under the event id in the same transaction as the effect, and treats an
// event it has recorded already as done. The message is acked only after
// the handler's commit, so a consumer that dies in between gets the event
// again, and the handler's record absorbs it.
type Consumer struct {
	// Durable is the consumer's name on the stream; every process running
	// it shares its position and its messages.
	Durable     string
	Description string
	// Subjects filters the stream; empty takes every event.
	Subjects []string
	// Handle applies one event, given with its body as published. It
	// returns ErrMalformed (wrapped) for an event it can never apply, which
	// is then dropped; any other error is retried after NakDelay.
	Handle func(ctx context.Context, e payment.Event, body []byte) error
	// AckWait is how long the broker waits for an ack before it delivers
	// the message again, default 30s.
	AckWait time.Duration
	// NakDelay is how long a message that Handle could not apply waits
	// before it is delivered again, default 1s.
	NakDelay time.Duration
	Logger   *slog.Logger
	// Fault is called at FaultAfterReceipt, after Handle's commit and
	// before the ack, for crash tests.
	Fault func(point string)
}

// ErrMalformed marks an event that a handler can never apply.
var ErrMalformed = errors.New("malformed event")

// Config is the durable consumer's configuration: explicit acks after the
// handler's commit, and no limit on redeliveries, since an event is never
// given up while the database is away.
func (c Consumer) Config() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        c.Durable,
		Description:    cmp.Or(c.Description, "chargeonce "+c.Durable),
		FilterSubjects: c.Subjects,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        cmp.Or(c.AckWait, 30*time.Second),
		MaxDeliver:     -1,
		MaxAckPending:  1000,
	}
}

func (c Consumer) log() *slog.Logger {
	return cmp.Or(c.Logger, slog.New(slog.DiscardHandler)).With("consumer", c.Durable)
}

// Run consumes until ctx ends. The stream may not exist yet (the server's
// relay creates it), the broker may be away, the consumer may be deleted:
// each time it waits, with a backoff, and starts over.
func (c Consumer) Run(ctx context.Context, js jetstream.JetStream) {
	log := c.log()
	backoff := time.Duration(0)
	for {
		handled, err := c.runOnce(ctx, js, log)
		if ctx.Err() != nil {
			log.Info("stopped consuming events")
			return
		}
		if handled {
			backoff = 0
		}
		backoff = min(max(2*backoff, 250*time.Millisecond), 30*time.Second)
		log.Warn("cannot consume the event stream; starting again", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			log.Info("stopped consuming events")
			return
		case <-time.After(backoff):
		}
	}
}

// runOnce creates or joins the durable consumer and applies its messages one
// by one until an error; handled says whether any came.
func (c Consumer) runOnce(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (handled bool, err error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, Stream, c.Config())
	if err != nil {
		return false, err
	}
	msgs, err := cons.Messages(jetstream.PullMaxMessages(100))
	if err != nil {
		return false, err
	}
	defer msgs.Stop()
	log.Info("consuming events", "stream", Stream)
	for {
		msg, err := msgs.Next(jetstream.NextContext(ctx))
		if err != nil {
			return handled, err
		}
		c.Apply(ctx, msg)
		handled = true
	}
}

// Apply applies one message, and acks it after the handler's commit.
func (c Consumer) Apply(ctx context.Context, msg jetstream.Msg) {
	log := c.log()
	e, err := payment.ParseEvent(msg.Data())
	if err == nil {
		// The event's trace, from its message's headers, for what Handle
		// stores of it (a webhook delivery keeps it for its attempts).
		err = c.Handle(tracing.Propagator.Extract(ctx, propagation.HeaderCarrier(msg.Headers())), e, msg.Data())
	} else {
		err = fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if errors.Is(err, ErrMalformed) {
		// No redelivery will make it apply.
		log.Error("dropping an event that can never be applied", "subject", msg.Subject(), "err", err)
		_ = msg.TermWithReason("not a chargeonce event")
		return
	}
	if err != nil {
		delay := cmp.Or(c.NakDelay, time.Second)
		if ctx.Err() == nil {
			log.Warn("event not applied; it will be delivered again", "event_id", e.ID, "err", err, "in", delay)
		}
		_ = msg.NakWithDelay(delay) // if this is lost too, AckWait redelivers it
		return
	}
	if c.Fault != nil {
		c.Fault(FaultAfterReceipt)
	}
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := msg.DoubleAck(ackCtx); err != nil {
		// Applied, not acked: the broker delivers it again and the handler
		// finds it done.
		log.Warn("event applied but not acked; its redelivery will be a no-op", "event_id", e.ID, "err", err)
	}
}
