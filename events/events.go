// Package events carries chargeonce's payment events from the outbox to
// their consumers. The payment service writes an event row in the
// transaction that finalizes an attempt (the outbox); the Relay publishes
// unsent rows to NATS JetStream, stream CHARGES, with the event id as
// Nats-Msg-Id so the stream drops a repeat within its duplicate window, and
// marks them sent only after the broker acknowledged them. Publishing is
// therefore at least once; consumers make the effect exactly once by
// recording it under the event id in the same transaction as the effect
// itself (see ConsumeReceipts, the reference consumer).
//
// The broker is an external NATS (NATS_URL), or, in development, one that
// Open embeds in the process with JetStream on a file store.
package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/payment"
)

// Stream is the JetStream stream that holds chargeonce's events.
const Stream = "CHARGES"

// Subjects of the stream, one per event type.
var Subjects = func() []string {
	subjects := make([]string, len(payment.EventTypes))
	for i, t := range payment.EventTypes {
		subjects[i] = payment.SubjectPrefix + t
	}
	return subjects
}()

// DuplicateWindow is how long the stream remembers a Nats-Msg-Id: a relay
// that publishes an event again within it (it died between the broker's ack
// and marking the row sent) adds nothing to the stream.
const DuplicateWindow = 2 * time.Minute

// MaxAge is how long the stream keeps an event: a consumer that is down
// for longer misses it. Webhook deliveries retry for 3 days from the
// delivery log, not from the stream.
const MaxAge = 7 * 24 * time.Hour

// StreamConfig is the CHARGES stream, with replicas copies of each event
// (1 on a single broker; 3 on a NATS cluster).
func StreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        Stream,
		Description: "chargeonce payment events: charge.succeeded, charge.failed, charge.requires_action, checkout_session.paid, checkout_session.expired, refund.succeeded, refund.failed, charge.late_refunded, charge.duplicate_refunded and merchant.card_testing_suspected",
		Subjects:    Subjects,
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Duplicates:  DuplicateWindow,
		MaxAge:      MaxAge,
		Replicas:    max(replicas, 1),
	}
}

// EnsureStream creates the CHARGES stream, or updates it to StreamConfig.
// A stream that already has that configuration is left alone: every relay
// calls this as it starts, and an update that changes nothing races, inside
// nats-server, with consumers being created on the stream (the race
// detector sees it in nats-server v2.15's fileStore).
func EnsureStream(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	cfg := StreamConfig(replicas)
	s, err := js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		s, err = js.UpdateStream(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", Stream, err)
	}
	return s, nil
}

// Fault points of the events path where a crash is most dangerous, for the
// crash tests (CHARGEONCE_CRASH_AT).
const (
	FaultAfterPublish = "after-publish" // the broker has the events; the outbox does not know
	FaultAfterReceipt = "after-receipt" // the receipt is committed; the message is not acked
)

// errNoBroker wraps failures to reach the broker.
var errNoBroker = errors.New("the event broker is unavailable")
