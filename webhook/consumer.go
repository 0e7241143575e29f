package webhook

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/payment"
)

// The JetStream names the consumer uses: the stream the events relay
// publishes to, and the consumer's durable name, shared by every instance
// so that each event is handled by one of them.
const (
	Stream   = "CHARGES"
	Consumer = "webhooks"
)

// Subjects are the subjects the consumer takes: every charge event.
var Subjects = []string{
	payment.SubjectPrefix + payment.EventChargeSucceeded,
	payment.SubjectPrefix + payment.EventChargeFailed,
}

// ConsumerConfig is the durable consumer's configuration: explicit acks,
// sent after the delivery row is committed; AckWait generous, since a
// message waits at most for one insert; and no limit on redeliveries, since
// an event is never given up while the database is away.
func (s *Service) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        Consumer,
		Description:    "chargeonce: queues each charge event for its merchant's webhook endpoint",
		FilterSubjects: Subjects,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        s.cfg.AckWait,
		MaxDeliver:     -1,
	}
}

// Delays of the consumer: before it tries again to reach the stream, and
// before a message that could not be stored is redelivered.
const (
	consumerRetryMin  = time.Second
	consumerRetryMax  = 30 * time.Second
	nakDelay          = 5 * time.Second
	storeEventTimeout = 10 * time.Second
)

// consume takes events from the durable consumer until ctx ends. The
// stream may not exist yet (the relay creates it), the connection may drop,
// the consumer may be deleted: each time it waits and starts over.
func (s *Service) consume(ctx context.Context) {
	wait := consumerRetryMin
	for {
		handled, err := s.consumeOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if handled {
			wait = consumerRetryMin
		}
		s.log.Warn("webhook consumer stopped; starting it again", "err", err, "in", wait)
		if !sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, consumerRetryMax)
	}
}

// consumeOnce creates or updates the durable consumer and handles its
// messages one by one until an error; handled says whether any came.
func (s *Service) consumeOnce(ctx context.Context) (handled bool, err error) {
	c, err := s.js.CreateOrUpdateConsumer(ctx, Stream, s.ConsumerConfig())
	if err != nil {
		return false, err
	}
	msgs, err := c.Messages(jetstream.PullMaxMessages(100))
	if err != nil {
		return false, err
	}
	defer msgs.Stop()
	for {
		msg, err := msgs.Next(jetstream.NextContext(ctx))
		if err != nil {
			return handled, err
		}
		s.handle(ctx, msg)
		handled = true
	}
}

// handle queues one event for its merchant's endpoint and acks it once the
// delivery row is committed. A merchant without an endpoint: acked, nothing
// stored. A redelivered event: the row exists, nothing is stored twice.
func (s *Service) handle(ctx context.Context, msg jetstream.Msg) {
	e, err := payment.ParseEvent(msg.Data())
	if err != nil {
		// No redelivery will make it parse.
		s.log.Error("webhook consumer: not a chargeonce event; dropped", "subject", msg.Subject(), "err", err)
		if err := msg.TermWithReason("not a chargeonce event"); err != nil {
			s.log.Warn("webhook consumer: terminate message", "err", err)
		}
		return
	}
	log := s.log.With("event_id", e.ID, "type", e.Type, "merchant_id", e.MerchantID)
	dbCtx, cancel := context.WithTimeout(ctx, storeEventTimeout)
	queued, err := s.store.insertDelivery(dbCtx, e, msg.Data(), s.cfg.Now())
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("webhook consumer: queue delivery failed; the event is redelivered", "err", err, "in", nakDelay)
		}
		_ = msg.NakWithDelay(nakDelay) // lost: AckWait redelivers it
		return
	}
	if err := msg.Ack(); err != nil {
		// The row is committed: the redelivery will find it and ack.
		log.Warn("webhook consumer: ack failed", "err", err)
	}
	if queued {
		log.Debug("webhook delivery queued")
		s.notify()
	}
}
