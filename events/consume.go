package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/payment"
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
	Durable string
	// Subjects filters the stream; empty takes every event.
	Subjects []string
	// Handle applies one event. It returns ErrMalformed (wrapped) for an
	// event it can never apply, which is then dropped; any other error is
	// retried after a delay.
	Handle func(ctx context.Context, e payment.Event) error
	// Replicas of the stream, which the consumer creates when missing.
	Replicas int
	// AckWait is how long the broker waits for an ack before it delivers
	// the message again, default 30s.
	AckWait time.Duration
	Logger  *slog.Logger
	// Fault is called at FaultAfterReceipt, after a commit and before the
	// ack, for crash tests.
	Fault func(point string)
}

// ErrMalformed marks an event that a handler can never apply.
var ErrMalformed = errors.New("malformed event")

// Run consumes until ctx ends, waiting for the broker while it is away.
func (c Consumer) Run(ctx context.Context, js jetstream.JetStream) error {
	log := cmp.Or(c.Logger, slog.New(slog.DiscardHandler)).With("consumer", c.Durable)
	fault := c.Fault
	if fault == nil {
		fault = func(string) {}
	}
	cons, err := c.open(ctx, js, log)
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	log.Info("consuming events", "stream", Stream)
	for {
		msg, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
			log.Info("stopped consuming events")
			return nil
		}
		if err != nil {
			log.Warn("waiting for events", "err", err)
			continue
		}
		c.handle(ctx, log, msg, fault)
	}
}

// open creates or joins the durable consumer, retrying while the broker is away.
func (c Consumer) open(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (jetstream.Consumer, error) {
	backoff := time.Duration(0)
	for {
		cons, err := c.create(ctx, js)
		if err == nil {
			return cons, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
		log.Warn("cannot reach the event stream; trying again", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

func (c Consumer) create(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	if _, err := EnsureStream(ctx, js, c.Replicas); err != nil {
		return nil, err
	}
	return js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
		Durable:        c.Durable,
		Description:    "chargeonce " + c.Durable,
		FilterSubjects: c.Subjects,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        cmp.Or(c.AckWait, 30*time.Second),
		MaxDeliver:     -1,
		MaxAckPending:  1000,
	})
}

// handle applies one message and acks it after the handler's commit.
func (c Consumer) handle(ctx context.Context, log *slog.Logger, msg jetstream.Msg, fault func(string)) {
	e, err := payment.ParseEvent(msg.Data())
	if err == nil {
		err = c.Handle(ctx, e)
	} else {
		err = fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if errors.Is(err, ErrMalformed) {
		log.Error("dropping an event that can never be applied", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	if err != nil {
		log.Warn("event not applied; it will be delivered again", "event_id", e.ID, "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	fault(FaultAfterReceipt)
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := msg.DoubleAck(ackCtx); err != nil {
		// Applied, not acked: the broker delivers it again and the handler
		// finds it done.
		log.Warn("event applied but not acked; its redelivery will be a no-op", "event_id", e.ID, "err", err)
	}
}
