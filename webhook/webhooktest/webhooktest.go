// Package webhooktest gives tests what the webhook service needs beside
// PostgreSQL: an embedded NATS server with JetStream (never the machine's
// own), the CHARGES stream, a way to publish events, and a stand-in for the
// events relay that publishes the outbox as the relay does.
package webhooktest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/payment"
	"chargeonce/sqlc"
)

// JetStream starts a NATS server with JetStream on a loopback port of its
// own, storing in a temporary directory, creates the CHARGES stream, and
// returns a client; both end with the test.
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("webhooktest: new NATS server: %v", err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("webhooktest: NATS server not ready after 30s")
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.Name("chargeonce test"))
	if err != nil {
		t.Fatalf("webhooktest: connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("webhooktest: JetStream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureStream(ctx, js); err != nil {
		t.Fatalf("webhooktest: %v", err)
	}
	return js
}

// EnsureStream creates the CHARGES stream the events relay publishes to:
// chargeonce.charge.succeeded and chargeonce.charge.failed, on file, with a
// 2-minute duplicates window. It stands in for the events package's own
// (events.EnsureStream), which owns the stream's configuration.
func EnsureStream(ctx context.Context, js jetstream.JetStream) error {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       "CHARGES",
		Subjects:   []string{payment.SubjectPrefix + payment.EventChargeSucceeded, payment.SubjectPrefix + payment.EventChargeFailed},
		Storage:    jetstream.FileStorage,
		Duplicates: 2 * time.Minute,
	})
	return err
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

// RelayOutbox publishes every unsent event of the outbox (charge_events) and
// marks it sent, as the events relay does, and says how many it published.
func RelayOutbox(t testing.TB, pool *pgxpool.Pool, js jetstream.JetStream) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		events, err := q.LockUnsentChargeEvents(ctx, 1000)
		if err != nil {
			return err
		}
		ids := make([]uuid.UUID, 0, len(events))
		for _, e := range events {
			PublishBody(t, js, payment.SubjectPrefix+e.Type, e.ID.String(), e.Body)
			ids = append(ids, e.ID)
		}
		n = len(ids)
		return q.MarkChargeEventsSent(ctx, sqlc.MarkChargeEventsSentParams{Now: time.Now(), Ids: ids})
	})
	if err != nil {
		t.Fatalf("webhooktest: relay the outbox: %v", err)
	}
	return n
}
