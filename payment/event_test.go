package payment

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
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
