package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db"
	"chargeonce/db/dbtest"
	"chargeonce/events/eventstest"
	"chargeonce/internal/testlog"
	"chargeonce/merchant"
	"chargeonce/payment"
)

func TestRelay_AWakeOrAnotherInstancesNotice_NotThePoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	m, err := merchant.New(pool, true).EnsureDevelopmentKey(ctx, "relay", "relay-key", merchant.KeySecret)
	require.NoError(t, err)
	js := eventstest.New(t).JetStream(t)

	// The poll is an hour: only a wake can get an event out within the
	// test's deadline.
	relay := NewRelay(pool, js, RelayConfig{Poll: time.Hour})
	runCtx, stop := context.WithCancel(ctx)
	var loops sync.WaitGroup
	loops.Go(func() { relay.Run(runCtx) })
	// Another instance, whose commits its notifier tells this one of.
	other := NewNotifier(pool, nil)
	loops.Go(func() { other.Run(runCtx) })
	t.Cleanup(func() { stop(); loops.Wait() })
	var stream jetstream.Stream
	require.Eventually(t, func() bool { stream, err = js.Stream(ctx, Stream); return err == nil },
		30*time.Second, 20*time.Millisecond, "the relay creates the stream at its first pass")

	for i, wake := range []func(payment.Event){
		func(payment.Event) { relay.Wake() }, // committed on the relay's own instance
		func(e payment.Event) { other.Committed([]payment.Event{e}) },
	} {
		e := payment.Event{ID: uuid.New(), Type: payment.EventChargeFailed, OccurredAt: time.Now().UTC(), MerchantID: m.ID,
			IdempotencyKey: fmt.Sprint("k", i), AttemptID: new(uuid.New()), Amount: 100, Currency: "USD",
			Failure: &payment.EventFailure{Code: "card_declined", Message: "declined"}}
		body, err := json.Marshal(e)
		require.NoError(t, err)
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return writeOutbox(ctx, tx, e, body) }))
		wake(e)

		require.Eventually(t, func() bool {
			info, err := stream.Info(ctx)
			return err == nil && info.State.Msgs == uint64(i+1)
		}, 30*time.Second, 10*time.Millisecond, "the wake got the event out")
		msg, err := stream.GetLastMsgForSubject(ctx, "chargeonce.charge.failed")
		require.NoError(t, err)
		require.Equal(t, e.ID.String(), msg.Header.Get(jetstream.MsgIDHeader))
		require.JSONEq(t, string(body), string(msg.Data), "the body is published as the outbox holds it")
		require.Eventually(t, func() bool {
			n, err := CountUnsent(ctx, pool)
			return err == nil && n == 0
		}, 30*time.Second, 10*time.Millisecond, "the relay marked the event sent")
	}
}

// After a notice the Notifier lets the next commits gather, so that one
// NOTIFY tells the other instances of all of them: three commits, the last
// two within the gather, make two notices, the second naming both.
func TestNotifier_CommitsWithinTheGather_ShareOneNotice(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := dbtest.NewPool(t)
	listener, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer listener.Release()
	_, err = listener.Exec(ctx, "LISTEN "+db.EventsChannel)
	require.NoError(t, err)

	n := NewNotifier(pool, nil)
	n.Gather = 500 * time.Millisecond
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); n.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	committed := func(key string) {
		n.Committed([]payment.Event{{ID: uuid.New(), MerchantID: uuid.New(), IdempotencyKey: key}})
	}
	next := func(within time.Duration) (db.EventsNotice, error) {
		waitCtx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		note, err := listener.Conn().WaitForNotification(waitCtx)
		if err != nil {
			return db.EventsNotice{}, err
		}
		var notice db.EventsNotice
		require.NoError(t, json.Unmarshal([]byte(note.Payload), &notice))
		return notice, nil
	}
	keys := func(notice db.EventsNotice) []string {
		var ks []string
		for _, a := range notice.Attempts {
			ks = append(ks, a.IdempotencyKey)
		}
		slices.Sort(ks)
		return ks
	}

	committed("a")
	first, err := next(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, n.ID, first.From)
	require.Equal(t, []string{"a"}, keys(first))
	sentFirst := time.Now()
	committed("b")
	committed("c")
	second, err := next(5 * time.Second)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(sentFirst), 400*time.Millisecond, "the second notice waited for the gather")
	require.Equal(t, []string{"b", "c"}, keys(second), "one notice for both commits")
	_, err = next(time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded, "and no third")
}

// Under load the relay lets events gather after each batch, so that a
// transaction carries many of them rather than one per charge.
func TestRelay_AfterABatch_EventsGatherIntoTheNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	m, err := merchant.New(pool, true).EnsureDevelopmentKey(ctx, "gather", "gather-key", merchant.KeySecret)
	require.NoError(t, err)
	js := eventstest.New(t).JetStream(t)
	relay := NewRelay(pool, js, RelayConfig{Poll: time.Hour, Gather: 2 * time.Second})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	insert := func(key string) {
		t.Helper()
		e := payment.Event{ID: uuid.New(), Type: payment.EventChargeFailed, OccurredAt: time.Now().UTC(), MerchantID: m.ID,
			IdempotencyKey: key, AttemptID: new(uuid.New()), Amount: 100, Currency: "USD",
			Failure: &payment.EventFailure{Code: "card_declined", Message: "declined"}}
		body, err := json.Marshal(e)
		require.NoError(t, err)
		require.NoError(t, writeOutbox(ctx, pool, e, body))
	}
	allSent := func(c *assert.CollectT) {
		n, err := CountUnsent(ctx, pool)
		require.NoError(c, err)
		require.Zero(c, n)
	}
	insert("first")
	require.EventuallyWithT(t, allSent, 30*time.Second, 10*time.Millisecond)
	start := time.Now()
	for i := range 20 {
		insert(fmt.Sprintf("burst-%d", i)) // each in a transaction of its own, each with its NOTIFY
	}
	require.EventuallyWithT(t, allSent, 30*time.Second, 10*time.Millisecond)
	var batches int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(DISTINCT sent_at) FROM charge_events WHERE idempotency_key LIKE 'burst-%'").Scan(&batches))
	require.Equal(t, 1, batches, "twenty events, one transaction")
	require.Less(t, time.Since(start), 10*time.Second)
}

func TestOpen_EmbedsABrokerOnLoopback_AndASecondProcessSharesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := t.TempDir()
	first, err := Open(ctx, BrokerConfig{StoreDir: store, Name: "first"})
	require.NoError(t, err)
	t.Cleanup(first.Close)
	require.NotNil(t, first.embedded)
	u, err := url.Parse(first.URL)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", u.Hostname(), "the embedded broker listens on loopback only")
	_, err = EnsureStream(ctx, first.JS, 1)
	require.NoError(t, err)

	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	_, err = Open(ctx, BrokerConfig{StoreDir: t.TempDir(), Port: port, Name: "elsewhere"})
	require.ErrorContains(t, err, "EMBEDDED_NATS_PORT",
		"a process on another data directory (another checkout, another database) does not mix its events in")
	second, err := Open(ctx, BrokerConfig{StoreDir: store, Port: port, Name: "second"})
	require.NoError(t, err)
	t.Cleanup(second.Close)
	require.Nil(t, second.embedded, "a broker already on the port is used, not started again")
	_, err = second.JS.Stream(ctx, Stream)
	require.NoError(t, err, "the second process sees the first's stream")
	require.NoError(t, second.Ping(ctx))
}

func TestRedact_HidesCredentials(t *testing.T) {
	t.Parallel()
	require.Equal(t, "nats://REDACTED@a:4222,nats://b:4222", redact("nats://user:s3cret@a:4222, nats://b:4222"))
	require.Equal(t, "nats://REDACTED@a:4222", redact("nats://t0ken@a:4222"))
	require.NotContains(t, redact("nats://user:s3cret@a:4222"), "s3cret")
}

func TestReceipts_AnEventOfAnotherDatabase_IsDroppedAndTheNextOnesFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	m, err := merchant.New(pool, true).EnsureDevelopmentKey(ctx, "receipts", "receipts-key", merchant.KeySecret)
	require.NoError(t, err)
	js := eventstest.New(t).JetStream(t)
	_, err = EnsureStream(ctx, js, 1)
	require.NoError(t, err)

	publish := func(merchant uuid.UUID) payment.Event {
		e := payment.Event{ID: uuid.New(), Type: payment.EventChargeSucceeded, OccurredAt: time.Now().UTC(), MerchantID: merchant,
			IdempotencyKey: "k-" + merchant.String(), AttemptID: new(uuid.New()), Amount: 100, Currency: "USD",
			Charge: &payment.EventCharge{ID: uuid.New(), ProviderChargeID: "ch_" + merchant.String(), CreatedAt: time.Now().UTC()}}
		body, err := json.Marshal(e)
		require.NoError(t, err)
		_, err = js.Publish(ctx, e.Subject(), body, jetstream.WithMsgID(e.ID.String()))
		require.NoError(t, err)
		return e
	}
	publish(uuid.New()) // a merchant this database never had
	ours := publish(m.ID)

	var logs testlog.Buffer
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Receipts(pool, slog.New(slog.NewTextHandler(&logs, nil)), nil).Run(runCtx, js)
	}()
	t.Cleanup(func() { stop(); <-done })
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(ctx, "SELECT count(*) FROM receipts WHERE event_id = $1", ours.ID).Scan(&n) == nil && n == 1
	}, 30*time.Second, 20*time.Millisecond, "the event after the foreign one gets its receipt")
	var total int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM receipts").Scan(&total))
	require.Equal(t, 1, total)
	require.Contains(t, logs.String(), "dropping an event that can never be applied")
	require.Equal(t, 1, strings.Count(logs.String(), "dropping an event"), "dropped once, not retried forever")
}

// writeOutbox writes e, whose JSON is body, to the outbox and its id to the
// relay's queue, as the payment store does in the transaction that
// finalizes an attempt.
func writeOutbox(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, e payment.Event, body []byte) error {
	_, err := db.Exec(ctx, `WITH event AS (
			INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, body, occurred_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id
		)
		INSERT INTO charge_events_unsent (event_id) SELECT id FROM event`,
		e.ID, e.Type, e.MerchantID, e.IdempotencyKey, e.AttemptID, body, e.OccurredAt)
	return err
}
