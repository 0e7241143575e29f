package main

import (
	"context"
	"encoding/json"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/events"
	"chargeonce/events/eventstest"
	"chargeonce/payment"
)

// streamed is one message of the CHARGES stream.
type streamed struct {
	msgID, subject string
	event          payment.Event
}

// readStream reads every message of the CHARGES stream, in order.
func readStream(t *testing.T, js jetstream.JetStream) []streamed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, events.Stream)
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	total := int(info.State.Msgs)
	out := make([]streamed, 0, total)
	if total == 0 {
		return out
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	for len(out) < total {
		batch, err := cons.Fetch(total-len(out), jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		for msg := range batch.Messages() {
			e, err := payment.ParseEvent(msg.Data())
			require.NoError(t, err)
			out = append(out, streamed{msgID: msg.Headers().Get(jetstream.MsgIDHeader), subject: msg.Subject(), event: e})
		}
		require.NoError(t, batch.Error())
	}
	return out
}

// countRows runs a count query.
func countRows(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// waitRows waits until the count query says want.
func waitRows(t *testing.T, pool *pgxpool.Pool, want int, within time.Duration, sql string, args ...any) {
	t.Helper()
	var n int
	require.Eventually(t, func() bool {
		n = countRows(t, pool, sql, args...)
		return n == want
	}, within, 50*time.Millisecond, "want %d from %q", want, sql)
}

const unsentEvents = "SELECT count(*) FROM charge_events WHERE sent_at IS NULL"

func TestEvents_TwoRelaysShareTheOutbox_EveryEventOnceOnTheStream(t *testing.T) {
	t.Parallel()
	broker := eventstest.New(t)
	dbURL := dbtest.NewDatabase(t)
	env := map[string]string{"NATS_URL": broker.URL()}
	servers := []*testServer{startServer(t, dbURL, env), startServer(t, dbURL, env)}

	// 500 charges over the two instances, one in five declined: each
	// instance's relay publishes whatever its NOTIFY or poll finds first.
	const n = 500
	keys := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range keys {
				input := visa(100 + i)
				if i%5 == 0 {
					input = withPaymentMethod("pm_card_chargeDeclined")
				}
				r := servers[i%2].chargeCard(t, "demo-key", newKey(), input)
				if !(assertNoErrors(t, r) && (r.Data.ChargeCard.Status == "SUCCEEDED" || r.Data.ChargeCard.Status == "FAILED")) {
					t.Errorf("charge %d: %+v", i, r)
				}
			}
		})
	}
	for i := range n {
		keys <- i
	}
	close(keys)
	wg.Wait()

	pool := openPool(t, dbURL)
	require.Equal(t, n, countRows(t, pool, "SELECT count(*) FROM charge_events"), "one outbox event per finalized attempt")
	waitRows(t, pool, 0, time.Minute, unsentEvents)

	got := readStream(t, broker.JetStream(t))
	require.Len(t, got, n, "every event on the stream, none twice")
	seen := map[string]bool{}
	for _, m := range got {
		require.False(t, seen[m.msgID], "event %s is on the stream twice", m.msgID)
		seen[m.msgID] = true
		require.Equal(t, m.event.ID.String(), m.msgID, "Nats-Msg-Id is the event id")
		require.Equal(t, "chargeonce."+m.event.Type, m.subject)
		require.Equal(t, 1, countRows(t, pool, "SELECT count(*) FROM charge_events WHERE id = $1 AND attempt_id = $2",
			m.event.ID, m.event.AttemptID), "the stream's event is the outbox's")
	}
	succeeded := countRows(t, pool, "SELECT count(*) FROM charge_attempts WHERE status = 'SUCCEEDED'")
	require.Equal(t, n-n/5, succeeded)
	bySubject := map[string]int{}
	for _, m := range got {
		bySubject[m.subject]++
	}
	require.Equal(t, map[string]int{"chargeonce.charge.succeeded": succeeded, "chargeonce.charge.failed": n / 5}, bySubject)
}

func eventJSON(t *testing.T, e payment.Event) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return b
}

// assertNoErrors reports (and records) a GraphQL response's errors.
func assertNoErrors(t *testing.T, r gqlResponse) bool {
	if len(r.Errors) > 0 || r.Data.ChargeCard == nil {
		t.Errorf("errors: %+v", r.Errors)
		return false
	}
	return true
}

func TestEvents_BrokerAway_EventsWaitInTheOutboxAndAllArrive(t *testing.T) {
	t.Parallel()
	broker := eventstest.New(t)
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, map[string]string{"NATS_URL": broker.URL()})
	pool := openPool(t, dbURL)

	first := s.chargeCard(t, "demo-key", newKey(), visa(500))
	require.Equal(t, "SUCCEEDED", first.Data.ChargeCard.Status)
	waitRows(t, pool, 0, 30*time.Second, unsentEvents)

	broker.Stop()
	const away = 20
	for i := range away {
		r := s.chargeCard(t, "demo-key", newKey(), visa(600+i))
		require.Empty(t, r.Errors, "charges go on while the broker is away")
		require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status)
	}
	// The relay keeps trying; nothing is marked sent that the broker did not take.
	time.Sleep(time.Second)
	require.Equal(t, away, countRows(t, pool, unsentEvents), "the events wait in the outbox")

	require.NoError(t, broker.Restart())
	waitRows(t, pool, 0, time.Minute, unsentEvents)
	got := readStream(t, broker.JetStream(t))
	require.Len(t, got, 1+away, "every event arrived, once")
	ids := map[string]bool{}
	for _, m := range got {
		ids[m.msgID] = true
	}
	require.Len(t, ids, 1+away)
	require.Contains(t, s.logText(), "events wait in the outbox")
}

func TestEvents_KilledBetweenPublishAndMark_PublishedAgain_OneReceipt(t *testing.T) {
	t.Parallel()
	broker := eventstest.New(t)
	dbURL := dbtest.NewDatabase(t)
	env := map[string]string{"DATABASE_URL": dbURL, "NATS_URL": broker.URL()}
	pool := openPool(t, dbURL)

	crashEnv := map[string]string{"CHARGEONCE_CRASH_AT": events.FaultAfterPublish}
	for k, v := range env {
		crashEnv[k] = v
	}
	p := startProcess(t, crashEnv)
	key := newKey()
	// The relay dies as soon as the broker acked the event, which may be
	// before or after the response went out: the answer may be lost.
	_, _ = p.postCharge(t, key, visa(1234))
	require.True(t, killedBySIGKILL(p.wait(t, time.Minute)), "the relay died between the broker's ack and the mark")
	require.Equal(t, "SUCCEEDED", attemptStatus(t, pool, key))

	js := broker.JetStream(t)
	onStream := readStream(t, js)
	require.Len(t, onStream, 1, "the broker has the event")
	require.Equal(t, 1, countRows(t, pool, unsentEvents), "the outbox does not know it was sent")

	// A new process publishes it again; the stream's duplicate window drops
	// the repeat, and the outbox row is marked at last.
	q := startProcess(t, env)
	waitRows(t, pool, 0, time.Minute, unsentEvents)
	require.Len(t, readStream(t, js), 1, "the repeat within the duplicate window added nothing")
	require.Equal(t, 1.0, scrape(t, q.client, q.URL+"/metrics").value("chargeonce_events_published_total", "duplicate", "true"),
		"the broker told the relay it had the event already")

	// Beyond the window the stream would keep a repeat: the consumer's own
	// deduplication is what makes the effect once. Publish the same event
	// again under another message id, as a repeat the window has forgotten.
	_, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: onStream[0].subject, Data: eventJSON(t, onStream[0].event)},
		jetstream.WithMsgID("repeat-after-the-window"))
	require.NoError(t, err)

	c := spawn(t, env, "consume", "receipts")
	waitLogged(t, c.exited, c.logs, regexp.MustCompile(`(already has its receipt)`), time.Minute)
	require.Equal(t, 1, countRows(t, pool, "SELECT count(*) FROM receipts WHERE idempotency_key = $1", key),
		"two deliveries of one event, one receipt")
	require.Equal(t, 1, countRows(t, pool, "SELECT count(*) FROM receipts"))
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	require.True(t, c.wait(t, 30*time.Second).Success(), "the consumer stops cleanly on SIGTERM")
}

func TestEvents_ReceiptsConsumerKilledBeforeAck_RedeliveredStillOneReceipt(t *testing.T) {
	t.Parallel()
	broker := eventstest.New(t)
	dbURL := dbtest.NewDatabase(t)
	env := map[string]string{"DATABASE_URL": dbURL, "NATS_URL": broker.URL()}
	s := startServer(t, dbURL, env)
	pool := openPool(t, dbURL)

	keys := []string{newKey(), newKey(), newKey()}
	for i, key := range keys {
		require.Equal(t, "SUCCEEDED", s.chargeCard(t, "demo-key", key, visa(700+i)).Data.ChargeCard.Status)
	}
	declined := s.chargeCard(t, "demo-key", newKey(), withPaymentMethod("pm_card_chargeDeclined"))
	require.Equal(t, "FAILED", declined.Data.ChargeCard.Status)
	waitRows(t, pool, 0, 30*time.Second, unsentEvents)

	crashEnv := map[string]string{"CHARGEONCE_CRASH_AT": events.FaultAfterReceipt}
	for k, v := range env {
		crashEnv[k] = v
	}
	c := spawn(t, crashEnv, "consume", "receipts")
	require.True(t, killedBySIGKILL(c.wait(t, time.Minute)), "the consumer died after its commit, before its ack")
	require.Equal(t, 1, countRows(t, pool, "SELECT count(*) FROM receipts"), "the first receipt was committed")

	again := spawn(t, env, "consume", "receipts")
	waitRows(t, pool, len(keys), time.Minute, "SELECT count(*) FROM receipts")
	waitLogged(t, again.exited, again.logs, regexp.MustCompile(`(already has its receipt)`), time.Minute)
	for _, key := range keys {
		require.Equal(t, 1, countRows(t, pool, "SELECT count(*) FROM receipts WHERE idempotency_key = $1", key))
	}
	require.Equal(t, len(keys), countRows(t, pool, `SELECT count(*) FROM receipts r
		JOIN charge_events e ON e.id = r.event_id AND e.type = 'charge.succeeded'
		JOIN charges c ON c.id = r.charge_id AND c.amount = r.amount`), "each receipt is its event's charge")
	require.NoError(t, again.cmd.Process.Signal(syscall.SIGTERM))
	require.True(t, again.wait(t, 30*time.Second).Success())
	require.Equal(t, len(keys), countRows(t, pool, "SELECT count(*) FROM receipts"), "no receipt for the decline")
}
