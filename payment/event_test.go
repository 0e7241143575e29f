package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/request"
)

func TestParseEvent_RefusesWhatIsNotAnEvent(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{}`, `not json`,
		`{"id":"7c4b8f3e-3e43-4d3b-9b39-1f6c0e1c1a11","type":"charge.refunded"}`,
		`{"id":"7c4b8f3e-3e43-4d3b-9b39-1f6c0e1c1a11","type":"charge.succeeded"}`,
		`{"id":"00000000-0000-0000-0000-000000000000","type":"charge.failed"}`} {
		_, err := ParseEvent([]byte(body))
		require.Error(t, err, body)
	}
}

func TestEventOf_CarriesTheOutcome(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := newChargeAttempt(Merchant{ID: uuid.New(), Name: "shop"}, "k-1",
		ChargeInput{Amount: 500, Currency: "JPY", PaymentMethod: "pm_card_visa", OrderID: "o-9"}, now, time.Minute, time.Hour)
	a = a.withCharge(&Charge{ID: uuid.New(), ProviderChargeID: "ch_1", CreatedAt: now})
	e := chargeEventOf(a, now)
	require.Equal(t, EventChargeSucceeded, e.Type)
	require.Equal(t, "chargeonce.charge.succeeded", e.Subject())
	require.Equal(t, &a.ID, e.AttemptID)
	require.Equal(t, "o-9", e.OrderID)
	require.NotEqual(t, chargeEventOf(a, now).ID, e.ID, "every event has its own id")

	a, a.Failure = a.withCharge(nil), &Failure{Code: "card_declined", Message: "declined"}
	f := chargeEventOf(a, now)
	require.Equal(t, "chargeonce.charge.failed", f.Subject())
	require.Nil(t, f.Charge)
	require.Equal(t, "card_declined", f.Failure.Code)
}

// setupAnnouncing is setup with every event the service announced after its
// commit kept, for the test to read by id.
func setupAnnouncing(t testing.TB) (*bundle, func(uuid.UUID) (Event, bool)) {
	t.Helper()
	var mu sync.Mutex
	announced := map[uuid.UUID]Event{}
	b := setup(t, Config{EventsCommitted: func(evs []Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			announced[e.ID] = e
		}
	}})
	return b, func(id uuid.UUID) (Event, bool) {
		mu.Lock()
		defer mu.Unlock()
		e, ok := announced[id]
		return e, ok
	}
}

// TestOutbox_PublishesEachEventAsItWasAnnounced: an outbox row's body holds
// what its columns do not, and the body the relay publishes
// (charge_event_body) is the event as its writer announced it, for an
// attempt's events (recorded in one statement, or in a transaction), a
// session's (which names the attempt that paid it in its body alone) and
// the merchant's (which names no attempt).
func TestOutbox_PublishesEachEventAsItWasAnnounced(t *testing.T) {
	t.Parallel()
	b, announced := setupAnnouncing(t)
	ctx := context.Background()
	_, err := b.svc.ChargeCard(ctx, b.merchant, "paid", visa(700))
	require.NoError(t, err)
	_, err = b.svc.ChargeCard(ctx, b.merchant, "declined", card("pm_card_chargeDeclined"))
	require.NoError(t, err)
	session, err := b.svc.CreateCheckoutSession(ctx, b.merchant, []byte("seed"), "cart", SessionInput{Amount: 300, Currency: "USD"})
	require.NoError(t, err)
	_, err = b.svc.ChargeCheckoutSession(ctx, b.merchant, SessionKeys, "page", session.ClientSecret, SessionCharge{PaymentMethod: "pm_card_visa"})
	require.NoError(t, err)
	require.NoError(t, b.svc.CardTestingSuspected(ctx, b.merchant, uuid.New(), b.clock.Now(), b.clock.Now().Add(time.Minute)))

	type row struct {
		ID        uuid.UUID
		Type      string
		Stored    json.RawMessage
		Published json.RawMessage
	}
	rows := dbtest.Query[[]byte](t, b.pool, `SELECT jsonb_build_object('id', id, 'type', type, 'stored', body, 'published', charge_event_body(e))
		FROM charge_events e WHERE merchant_id = $1`, b.merchant.ID)
	types := map[string]bool{}
	for _, raw := range rows {
		var r row
		require.NoError(t, json.Unmarshal(raw, &r))
		types[r.Type] = true
		e, ok := announced(r.ID)
		require.True(t, ok, "%s %s was not announced", r.Type, r.ID)
		want, err := json.Marshal(e)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(r.Published), r.Type)
		var stored map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r.Stored, &stored))
		for _, column := range []string{"id", "type", "merchantId", "idempotencyKey"} {
			require.NotContains(t, stored, column, "%s's body holds its row's %s", r.Type, column)
		}
		require.Less(t, len(r.Stored), len(r.Published), r.Type)
	}
	for _, typ := range []string{EventChargeSucceeded, EventChargeFailed, EventSessionPaid, EventCardTestingSuspected} {
		require.True(t, types[typ], "no %s written", typ)
	}
}

// TestOutbox_AChargeSucceededTakesWhatItsChargeHoldsFromTheChargeRow: a
// charge.succeeded's row names its charge, its body holds the request's id
// alone (nothing when it is a UUID, which its row's request_id holds), and
// the body the relay publishes is byte for byte the jsonb of the
// event its writer announced, times included, whatever their fraction of a
// second (Go's encoding drops the fraction's trailing zeros), with an order
// and without, with a request id and without: as one event's body reads it
// and as the relay's batch does.
func TestOutbox_AChargeSucceededTakesWhatItsChargeHoldsFromTheChargeRow(t *testing.T) {
	t.Parallel()
	b, announced := setupAnnouncing(t)
	ctx := context.Background()
	second := time.Now().Truncate(time.Second)
	fractions := []time.Duration{0, 500 * time.Millisecond, 120 * time.Microsecond, 123456 * time.Microsecond,
		999999 * time.Microsecond, 1, 999}
	for i, fraction := range fractions {
		b.clock.now.Store(second.Add(time.Duration(i) * time.Second).Add(fraction).UnixNano())
		in, ctx := visa(int64(100+i)), ctx
		if i%2 == 0 {
			in.OrderID = fmt.Sprintf("order-%d", i)
		}
		switch i % 3 {
		case 1:
			ctx = request.With(ctx, fmt.Sprintf("request-%d", i)) // an X-Request-Id of the caller's
		case 2:
			ctx = request.With(ctx, uuid.NewString()) // as the edge makes them
		}
		r, err := b.svc.ChargeCard(ctx, b.merchant, fmt.Sprintf("fraction-%d", i), in)
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, r.Status)
	}

	type row struct {
		ID        uuid.UUID       `json:"id"`
		Charge    *uuid.UUID      `json:"charge"`
		Stored    json.RawMessage `json:"stored"`
		RequestID *uuid.UUID      `json:"request_id"`
		Published string          `json:"published"`
	}
	rows := dbtest.Query[[]byte](t, b.pool, `SELECT jsonb_build_object('id', id, 'charge', charge_id, 'stored', body,
			'request_id', request_id, 'published', charge_event_body(e)::text)
		FROM charge_events e WHERE merchant_id = $1 AND type = 'charge.succeeded'`, b.merchant.ID)
	require.Len(t, rows, len(fractions))
	relayed := relayedBodies(t, b.pool)
	inRow := 0
	for _, raw := range rows {
		var r row
		require.NoError(t, json.Unmarshal(raw, &r))
		e, ok := announced(r.ID)
		require.True(t, ok, "%s was not announced", r.ID)
		require.NotNil(t, r.Charge, "the event names no charge")
		require.Equal(t, e.Charge.ID, *r.Charge)
		var stored map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r.Stored, &stored))
		if e.Request.ID != nil && uuid.Validate(*e.Request.ID) == nil { // the edge's: the row holds it
			inRow++
			require.NotNil(t, r.RequestID, "a UUID request id left out of the row")
			require.Equal(t, *e.Request.ID, r.RequestID.String())
			require.Empty(t, stored, "the body holds what the row does: %s", r.Stored)
		} else {
			require.Nil(t, r.RequestID, "the row holds a request id that is not the request's")
			require.Equal(t, []string{"request"}, slices.Collect(maps.Keys(stored)), "the body holds more than the request: %s", r.Stored)
			id, err := json.Marshal(e.Request.ID)
			require.NoError(t, err)
			require.JSONEq(t, fmt.Sprintf(`{"id": %s}`, id), string(stored["request"]))
		}

		want, err := json.Marshal(e)
		require.NoError(t, err)
		wantBytes := dbtest.Query[string](t, b.pool, "SELECT $1::jsonb::text", string(want))[0]
		require.Equal(t, wantBytes, r.Published, "occurred at %s", e.OccurredAt.Format(time.RFC3339Nano))
		require.Equal(t, wantBytes, relayed[r.ID], "the relay's batch, occurred at %s", e.OccurredAt.Format(time.RFC3339Nano))
	}
	require.Equal(t, 2, inRow)
}
