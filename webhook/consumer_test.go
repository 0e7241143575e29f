package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"chargeonce/events"
	"chargeonce/payment"
	"chargeonce/webhook/webhooktest"
)

// unacked is a message whose ack is lost: the consumer died between its
// commit and its ack.
type unacked struct{ jetstream.Msg }

func (unacked) Ack() error                      { return nil }
func (unacked) DoubleAck(context.Context) error { return nil }

func TestConsumer_RedeliveredMessage_YieldsOneDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.merchant(t, "shop")
	rc := newReceiver(t, ok)
	b.set(t, "shop", rc.URL)
	cfg := testConfig()
	cfg.AckWait = time.Second // JetStream redelivers an unacked message after it
	s := b.newService(t, cfg)
	ctx := context.Background()

	// An instance queues the first event and dies before it acks.
	crashed := newEvent(shop)
	webhooktest.Publish(t, b.js, crashed)
	c, err := b.js.CreateOrUpdateConsumer(ctx, events.Stream, s.consumer().Config())
	require.NoError(t, err)
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(30*time.Second))
	require.NoError(t, err)
	msg := <-batch.Messages()
	require.NotNil(t, msg, "fetch: %v", batch.Error())
	s.consumer().Apply(ctx, unacked{msg})
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM webhook_deliveries"))

	// The same event published twice by the relay within the duplicates
	// window (the stream keeps one), and once more after it (the stream
	// keeps both: the body is the same, the message id absent).
	again := newEvent(shop)
	webhooktest.Publish(t, b.js, again)
	webhooktest.Publish(t, b.js, again)
	body, err := json.Marshal(again)
	require.NoError(t, err)
	webhooktest.PublishBody(t, b.js, again.Subject(), "", body)

	// A merchant without an endpoint: acked, nothing stored.
	webhooktest.Publish(t, b.js, newEvent(b.merchant(t, "quiet")))

	// The instance starts again.
	b.run(t, s)
	waitFor(t, eventually, "every message acked, the crashed one redelivered", func() bool { return b.allAcked(t) })
	waitFor(t, eventually, "both deliveries made", func() bool {
		return b.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'") == 2
	})

	info, err := c.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(4), info.AckFloor.Stream, "four messages in the stream: the duplicate was dropped")
	require.GreaterOrEqual(t, info.Delivered.Consumer, uint64(5), "the unacked message was delivered again")
	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM webhook_deliveries"), "one delivery per event")
	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM webhook_attempts"))
	got := rc.got()
	require.Len(t, got, 2)
	require.ElementsMatch(t, []string{crashed.ID.String(), again.ID.String()}, []string{got[0].eventID(t), got[1].eventID(t)})
}

func TestConsumer_MalformedMessage_IsDroppedAndTheNextOnesFlow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.merchant(t, "shop")
	rc := newReceiver(t, ok)
	b.set(t, "shop", rc.URL)
	b.start(t, testConfig())

	webhooktest.PublishBody(t, b.js, payment.SubjectPrefix+payment.EventChargeSucceeded, "", []byte(`{"not":"an event"}`))
	e := newEvent(shop)
	webhooktest.Publish(t, b.js, e)
	waitFor(t, eventually, "the event after the malformed one is delivered", func() bool { return len(rc.got()) == 1 })
	waitFor(t, eventually, "every message done", func() bool { return b.allAcked(t) })
	require.Equal(t, e.ID.String(), rc.got()[0].eventID(t))
	require.Contains(t, b.log.String(), "dropping an event that can never be applied")
}

func TestConsumer_StreamCreatedLater_ConsumerStartsWhenItExists(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	require.NoError(t, b.js.DeleteStream(ctx, events.Stream))
	shop := b.merchant(t, "shop")
	rc := newReceiver(t, ok)
	b.set(t, "shop", rc.URL)
	b.start(t, testConfig())
	waitFor(t, eventually, "the consumer says it waits", func() bool {
		return strings.Contains(b.log.String(), "cannot consume the event stream; starting again")
	})
	_, err := events.EnsureStream(ctx, b.js, 1)
	require.NoError(t, err)
	webhooktest.Publish(t, b.js, newEvent(shop))
	waitFor(t, eventually, "the event is delivered", func() bool { return len(rc.got()) == 1 })
}
