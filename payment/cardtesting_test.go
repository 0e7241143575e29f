package payment

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// TestCardTestingSuspected_TheMerchantsEventGoesToTheOutbox: the suspicion's
// record is an event of the merchant's own, naming no attempt and no
// session, announced once it commits and readable by every consumer.
func TestCardTestingSuspected_TheMerchantsEventGoesToTheOutbox(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var announced []Event
	b := setup(t, Config{EventsCommitted: func(evs []Event) {
		mu.Lock()
		defer mu.Unlock()
		announced = append(announced, evs...)
	}})
	keyID := uuid.New()
	at := b.clock.Now()
	require.NoError(t, b.svc.CardTestingSuspected(context.Background(), b.merchant, keyID, at, at.Add(15*time.Minute)))

	bodies := dbtest.Query[[]byte](t, b.pool, `SELECT charge_event_body(charge_events) FROM charge_events
		WHERE type = 'merchant.card_testing_suspected' AND attempt_id IS NULL AND checkout_session_id IS NULL AND merchant_id = $1`, b.merchant.ID)
	require.Len(t, bodies, 1)
	e, err := ParseEvent(bodies[0])
	require.NoError(t, err)
	require.Equal(t, EventCardTestingSuspected, e.Type)
	require.Equal(t, b.merchant.ID, e.MerchantID)
	require.Equal(t, keyID, e.CardTesting.KeyID)
	require.WithinDuration(t, at.Add(15*time.Minute), e.CardTesting.Until, time.Microsecond)
	require.Nil(t, e.AttemptID)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, announced, 1, "announced at its commit, like every event")
	require.Equal(t, e.ID, announced[0].ID)

	_, err = ParseEvent([]byte(`{"id":"7c4b8f3e-3e43-4d3b-9b39-1f6c0e1c1a11","type":"merchant.card_testing_suspected"}`))
	require.Error(t, err, "a suspicion names its key")
}
