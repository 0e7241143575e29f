// Package webhooktest gives tests what the webhook service needs beside
// PostgreSQL: an embedded NATS server with JetStream (never the machine's
// own), the CHARGES stream, and a way to publish events as the relay does.
package webhooktest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/events"
	"chargeonce/events/eventstest"
	"chargeonce/payment"
)

// JetStream starts a NATS server with JetStream for the test (see
// eventstest), creates the CHARGES stream, and returns a client; both end
// with the test.
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js := eventstest.New(t).JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := events.EnsureStream(ctx, js, 1); err != nil {
		t.Fatalf("webhooktest: %v", err)
	}
	return js
}

// Publish publishes e as the relay does: its JSON on its subject, with its
// id as Nats-Msg-Id, so the stream drops a second copy within its
// duplicates window.
func Publish(t testing.TB, js jetstream.JetStream, e payment.Event) {
	t.Helper()
	body, err := json.Marshal(e)
	if err != nil {
		t.Fatalf("webhooktest: marshal event: %v", err)
	}
	PublishBody(t, js, e.Subject(), e.ID.String(), body)
}

// PublishBody publishes body on subject, with msgID as Nats-Msg-Id unless
// it is empty.
func PublishBody(t testing.TB, js jetstream.JetStream, subject, msgID string, body []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	if _, err := js.Publish(ctx, subject, body, opts...); err != nil {
		t.Fatalf("webhooktest: publish to %s: %v", subject, err)
	}
}
