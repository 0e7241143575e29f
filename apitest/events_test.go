package apitest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/events"
	"chargeonce/events/eventstest"
	"chargeonce/loop"
	"chargeonce/loop/looptest"
)

const unsentEvents = "SELECT count(*) FROM charge_events WHERE sent_at IS NULL"

func TestEvents_TwoRelaysShareTheOutbox_EveryEventOnceOnTheStream(t *testing.T) {
	t.Parallel()
	broker := eventstest.New(t)
	dbURL := dbtest.NewDatabase(t)
	env := map[string]string{"NATS_URL": broker.URL()}
	servers := []*Server{StartOn(t, dbURL, env), StartOn(t, dbURL, env)}

	// 500 charges over the two instances, one in five declined: each
	// instance's relay publishes whatever its NOTIFY or poll finds first.
	const n = 500
	keys := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range keys {
				input := Visa(100 + i)
				if i%5 == 0 {
					input = WithPaymentMethod("pm_card_chargeDeclined")
				}
				r := servers[i%2].ChargeCard(t, "demo-key", NewKey(), input)
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

	pool := dbtest.Open(t, dbURL)
	require.Equal(t, n, CountRows(t, pool, "SELECT count(*) FROM charge_events"), "one outbox event per finalized attempt")
	WaitRows(t, pool, 0, time.Minute, unsentEvents)

	got := eventstest.ReadStream(t, broker.JetStream(t), events.Stream)
	require.Len(t, got, n, "every event on the stream, none twice")
	seen := map[string]bool{}
	for _, m := range got {
		require.False(t, seen[m.MsgID], "event %s is on the stream twice", m.MsgID)
		seen[m.MsgID] = true
		require.Equal(t, m.Event.ID.String(), m.MsgID, "Nats-Msg-Id is the event id")
		require.Equal(t, "chargeonce."+m.Event.Type, m.Subject)
		require.Equal(t, 1, CountRows(t, pool, "SELECT count(*) FROM charge_events WHERE id = $1 AND attempt_id = $2",
			m.Event.ID, m.Event.AttemptID), "the stream's event is the outbox's")
	}
	succeeded := CountRows(t, pool, "SELECT count(*) FROM charge_attempts WHERE status = 'SUCCEEDED'")
	require.Equal(t, n-n/5, succeeded)
	bySubject := map[string]int{}
	for _, m := range got {
		bySubject[m.Subject]++
	}
	require.Equal(t, map[string]int{"chargeonce.charge.succeeded": succeeded, "chargeonce.charge.failed": n / 5}, bySubject)
}

// assertNoErrors reports (and records) a GraphQL response's errors.
func assertNoErrors(t *testing.T, r Response) bool {
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
	s := StartOn(t, dbURL, map[string]string{"NATS_URL": broker.URL()})
	pool := dbtest.Open(t, dbURL)

	first := s.ChargeCard(t, "demo-key", NewKey(), Visa(500))
	require.Equal(t, "SUCCEEDED", first.Data.ChargeCard.Status)
	WaitRows(t, pool, 0, 30*time.Second, unsentEvents)

	broker.Stop()
	const away = 20
	for i := range away {
		r := s.ChargeCard(t, "demo-key", NewKey(), Visa(600+i))
		require.Empty(t, r.Errors, "charges go on while the broker is away")
		require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status)
	}
	// A relay pass took the first events and failed (the broker never
	// acked): nothing is marked sent that the broker did not take.
	tried := looptest.WaitFor(t, s.Passes.Relay, 1, func(p loop.Pass) bool { return p.Err != nil })
	require.Equal(t, 0, tried[0].Next.Result, "nothing sent")
	require.Equal(t, away, CountRows(t, pool, unsentEvents), "the events wait in the outbox")

	require.NoError(t, broker.Restart())
	WaitRows(t, pool, 0, time.Minute, unsentEvents)
	got := eventstest.ReadStream(t, broker.JetStream(t), events.Stream)
	require.Len(t, got, 1+away, "every event arrived, once")
	require.Equal(t, 1+away, eventstest.DistinctMsgIDs(got))
	require.Contains(t, s.LogText(), "events wait in the outbox")
}
