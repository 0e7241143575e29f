package systest

import (
	"context"
	"encoding/json"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/events"
	"chargeonce/events/eventstest"
	"chargeonce/internal/apiclient"
	"chargeonce/metrics/metricstest"
)

const unsentEvents = "SELECT count(*) FROM charge_events WHERE sent_at IS NULL"

// alreadyReceipted is what the receipts consumer logs for an event it has
// handled before.
var alreadyReceipted = regexp.MustCompile(`already has its receipt`)

func TestEvents_KilledBetweenPublishAndMark_PublishedAgain_OneReceipt(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	broker := eventstest.New(t)
	dbURL := dbtest.NewDatabase(t)
	env := map[string]string{"DATABASE_URL": dbURL, "NATS_URL": broker.URL()}
	pool := dbtest.Open(t, dbURL)

	p := startServer(t, withCrash(env, events.FaultAfterPublish))
	key := newKey()
	// The relay dies as soon as the broker acked the event, which may be
	// before or after the response went out: the answer may be lost.
	_, _ = p.demo().ChargeCard(t.Context(), key, visa(1234))
	requireKilled(t, p.Process, time.Minute, "the relay died between the broker's ack and the mark")
	require.Equal(t, "SUCCEEDED", attemptStatus(t, pool, key))

	js := broker.JetStream(t)
	onStream := eventstest.ReadStream(t, js, events.Stream)
	require.Len(t, onStream, 1, "the broker has the event")
	require.Equal(t, 1, countRows(t, pool, unsentEvents), "the outbox does not know it was sent")

	// A new process publishes it again; the stream's duplicate window drops
	// the repeat, and the outbox row is marked at last.
	q := startServer(t, env)
	waitRows(t, pool, 0, time.Minute, unsentEvents)
	require.Len(t, eventstest.ReadStream(t, js, events.Stream), 1, "the repeat within the duplicate window added nothing")
	require.Equal(t, 1.0, metricstest.Scrape(t, q.HTTP, q.URL+"/metrics").Value("chargeonce_events_published_total", "duplicate", "true"),
		"the broker told the relay it had the event already")

	// Beyond the window the stream would keep a repeat: the consumer's own
	// deduplication is what makes the effect once. Publish the same event
	// again under another message id, as a repeat the window has forgotten.
	data, err := json.Marshal(onStream[0].Event)
	require.NoError(t, err)
	_, err = js.PublishMsg(context.Background(), &nats.Msg{Subject: onStream[0].Subject, Data: data},
		jetstream.WithMsgID("repeat-after-the-window"))
	require.NoError(t, err)

	c := start(t, env, nil, "consume", "receipts")
	waitLogged(t, c, alreadyReceipted, time.Minute)
	require.Equal(t, 1, countRows(t, pool, "SELECT count(*) FROM receipts WHERE idempotency_key = $1", key),
		"two deliveries of one event, one receipt")
	require.Equal(t, 1, countRows(t, pool, "SELECT count(*) FROM receipts"))
	requireStopsCleanly(t, c, 30*time.Second, "the consumer stops cleanly on SIGTERM")
}

func TestEvents_ReceiptsConsumerKilledBeforeAck_RedeliveredStillOneReceipt(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	broker := eventstest.New(t)
	dbURL := dbtest.NewDatabase(t)
	env := map[string]string{"DATABASE_URL": dbURL, "NATS_URL": broker.URL()}
	s := startServer(t, env)
	pool := dbtest.Open(t, dbURL)

	keys := []string{newKey(), newKey(), newKey()}
	for i, key := range keys {
		require.Equal(t, "SUCCEEDED", s.chargeCard(t, apiclient.DemoAPIKey, key, visa(700+i)).Status)
	}
	declined := s.chargeCard(t, apiclient.DemoAPIKey, newKey(), withPaymentMethod("pm_card_chargeDeclined"))
	require.Equal(t, "FAILED", declined.Status)
	waitRows(t, pool, 0, 30*time.Second, unsentEvents)

	c := start(t, withCrash(env, events.FaultAfterReceipt), nil, "consume", "receipts")
	requireKilled(t, c, time.Minute, "the consumer died after its commit, before its ack")
	require.Equal(t, 1, countRows(t, pool, "SELECT count(*) FROM receipts"), "the first receipt was committed")

	again := start(t, env, nil, "consume", "receipts")
	waitRows(t, pool, len(keys), time.Minute, "SELECT count(*) FROM receipts")
	waitLogged(t, again, alreadyReceipted, time.Minute)
	for _, key := range keys {
		require.Equal(t, 1, countRows(t, pool, "SELECT count(*) FROM receipts WHERE idempotency_key = $1", key))
	}
	require.Equal(t, len(keys), countRows(t, pool, `SELECT count(*) FROM receipts r
		JOIN charge_events e ON e.id = r.event_id AND e.type = 'charge.succeeded'
		JOIN charges c ON c.id = r.charge_id AND c.amount = r.amount`), "each receipt is its event's charge")
	requireStopsCleanly(t, again, 30*time.Second, "the consumer stops cleanly on SIGTERM")
	require.Equal(t, len(keys), countRows(t, pool, "SELECT count(*) FROM receipts"), "no receipt for the decline")
}

// The outbox's queue of unsent events (charge_events_unsent) is an unlogged
// table, which a crash of PostgreSQL empties: crash recovery resets every
// unlogged table, and a promoted standby starts with it empty. The events
// are logged rows of charge_events, and the relay queues again, before its
// next batch, every event the broker has not taken. Here: charges while the
// broker is away, their events waiting in the outbox; the server killed
// (SIGKILL), PostgreSQL crashed (an immediate stop, so that its restart
// recovers from the WAL) and started again with the queue empty; a new
// server, with the broker back, publishes every waiting event, once.
func TestEvents_PostgresCrashed_EveryWaitingEventIsPublished(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	const waiting = 10
	const queued = "SELECT count(*) FROM charge_events_unsent u JOIN charge_events e ON e.id = u.event_id"
	pg, dbURL := startDurablePostgres(t)
	broker := eventstest.New(t)
	env := map[string]string{"DATABASE_URL": dbURL, "NATS_URL": broker.URL()}
	doomed := startServer(t, env)
	broker.Stop()
	for i := range waiting {
		r, err := doomed.demo().ChargeCard(t.Context(), newKey(), visa(700+i))
		require.NoError(t, err, "charges go on while the broker is away")
		require.Equal(t, apiclient.Succeeded, r.Status)
	}
	before := dbtest.Open(t, dbURL)
	require.Equal(t, waiting, countRows(t, before, unsentEvents), "the events wait in the outbox")
	require.Equal(t, waiting, countRows(t, before, queued), "on the relay's queue")
	before.Close()
	require.NoError(t, syscall.Kill(doomed.PID(), syscall.SIGKILL))
	<-doomed.Done()

	require.NoError(t, pg.Crash(t.Context()))
	require.NoError(t, pg.Restart(t.Context()))
	pool := dbtest.Open(t, dbURL)
	require.Equal(t, waiting, countRows(t, pool, unsentEvents), "the events outlive the crash")
	require.Zero(t, countRows(t, pool, queued), "the crash emptied the relay's queue")

	require.NoError(t, broker.Restart())
	after := startServer(t, env)
	waitRows(t, pool, 0, time.Minute, unsentEvents)
	require.Regexp(t, `level=WARN msg="the relay's queue was emptied.* events=10`, after.Output(),
		"the relay says it queued the events again")
	got := eventstest.ReadStream(t, broker.JetStream(t), events.Stream)
	require.Len(t, got, waiting, "every waiting event arrived")
	require.Equal(t, waiting, eventstest.DistinctMsgIDs(got), "each once")
}
