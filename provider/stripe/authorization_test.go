package stripe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

func TestAuthorizationOf_ReadsEachStateOfAPaymentIntent(t *testing.T) {
	t.Parallel()
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	before := created.Add(5 * 24 * time.Hour)
	now := created.Add(time.Hour)
	lapsedNow := before.Add(time.Minute)
	charge := func(status stripego.ChargeStatus, captureBefore time.Time) *stripego.Charge {
		ch := &stripego.Charge{ID: "ch_1", Status: status, PaymentMethodDetails: &stripego.ChargePaymentMethodDetails{
			Card: &stripego.ChargePaymentMethodDetailsCard{}}}
		if !captureBefore.IsZero() {
			ch.PaymentMethodDetails.Card.CaptureBefore = captureBefore.Unix()
		}
		return ch
	}
	manual := func(status stripego.PaymentIntentStatus, received int64, reason stripego.PaymentIntentCancellationReason, marks map[string]string) *stripego.PaymentIntent {
		return &stripego.PaymentIntent{ID: "pi_1", Status: status, Amount: 1000, AmountReceived: received, Currency: "usd",
			CaptureMethod: stripego.PaymentIntentCaptureMethodManual, Created: created.Unix(), CancellationReason: reason,
			LatestCharge: charge(stripego.ChargeStatusSucceeded, before), Metadata: marks}
	}
	final := map[string]string{MetadataCapturePrefix + "a": "400", MetadataCapturePrefix + "b": "300" + captureMarkFinal}
	part := map[string]string{MetadataCapturePrefix + "a": "400"}
	tests := map[string]struct {
		pi    *stripego.PaymentIntent
		now   time.Time
		state payment.AuthorizationState
		got   int64 // captured
	}{
		"open":                           {manual(stripego.PaymentIntentStatusRequiresCapture, 0, "", nil), now, payment.AuthorizationOpen, 0},
		"open, a part captured":          {manual(stripego.PaymentIntentStatusRequiresCapture, 400, "", part), now, payment.AuthorizationOpen, 400},
		"captured in full":               {manual(stripego.PaymentIntentStatusSucceeded, 1000, "", nil), lapsedNow, payment.AuthorizationCaptured, 1000},
		"final capture of a part":        {manual(stripego.PaymentIntentStatusSucceeded, 700, "", final), lapsedNow, payment.AuthorizationCaptured, 700},
		"a part, before its expiry":      {manual(stripego.PaymentIntentStatusSucceeded, 400, "", part), now, payment.AuthorizationCaptured, 400},
		"a part, lapsed since":           {manual(stripego.PaymentIntentStatusSucceeded, 400, "", part), lapsedNow, payment.AuthorizationExpired, 400},
		"voided":                         {manual(stripego.PaymentIntentStatusCanceled, 0, stripego.PaymentIntentCancellationReasonRequestedByCustomer, nil), now, payment.AuthorizationVoided, 0},
		"cancelled elsewhere":            {manual(stripego.PaymentIntentStatusCanceled, 0, stripego.PaymentIntentCancellationReasonDuplicate, nil), now, payment.AuthorizationVoided, 0},
		"lapsed":                         {manual(stripego.PaymentIntentStatusCanceled, 0, stripego.PaymentIntentCancellationReasonAutomatic, nil), lapsedNow, payment.AuthorizationExpired, 0},
		"lapsed (expired)":               {manual(stripego.PaymentIntentStatusCanceled, 0, stripego.PaymentIntentCancellationReasonExpired, nil), lapsedNow, payment.AuthorizationExpired, 0},
		"cancelled after a part":         {manual(stripego.PaymentIntentStatusCanceled, 400, stripego.PaymentIntentCancellationReasonRequestedByCustomer, part), now, payment.AuthorizationCaptured, 400},
		"lapsed after a part, cancelled": {manual(stripego.PaymentIntentStatusCanceled, 400, stripego.PaymentIntentCancellationReasonAutomatic, part), lapsedNow, payment.AuthorizationExpired, 400},
	}
	for name, tt := range tests {
		auth, ok := authorizationOf(tt.pi, tt.now)
		require.True(t, ok, name)
		require.Equal(t, payment.ProviderAuthorization{State: tt.state, Amount: 1000, Captured: tt.got, ExpiresAt: before}, auth, name)
	}

	for name, pi := range map[string]*stripego.PaymentIntent{
		"waiting for 3-D Secure": {Status: stripego.PaymentIntentStatusRequiresAction},
		"declined":               {Status: stripego.PaymentIntentStatusRequiresPaymentMethod},
		"processing":             {Status: stripego.PaymentIntentStatusProcessing},
		"cancelled unauthorized": {Status: stripego.PaymentIntentStatusCanceled, CaptureMethod: stripego.PaymentIntentCaptureMethodManual,
			CancellationReason: stripego.PaymentIntentCancellationReasonAbandoned},
		"cancelled after a failed charge": {Status: stripego.PaymentIntentStatusCanceled, CaptureMethod: stripego.PaymentIntentCaptureMethodManual,
			LatestCharge: charge(stripego.ChargeStatusFailed, time.Time{})},
	} {
		_, ok := authorizationOf(pi, now)
		require.False(t, ok, name)
	}
}

func TestAuthorizationOf_WithoutCaptureBefore_LapsesSevenDaysAfterCreation(t *testing.T) {
	t.Parallel()
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	pi := &stripego.PaymentIntent{ID: "pi_1", Status: stripego.PaymentIntentStatusRequiresCapture, Amount: 1000,
		CaptureMethod: stripego.PaymentIntentCaptureMethodManual, Created: created.Unix(), LatestCharge: &stripego.Charge{ID: "ch_1"}}
	auth, ok := authorizationOf(pi, created)
	require.True(t, ok)
	require.Equal(t, created.Add(7*24*time.Hour), auth.ExpiresAt)
	require.False(t, multicaptureAvailable(pi), "unknown is no: a part would release the rest")
}

func TestAuthorizationOf_AnAutomaticCharge_IsCapturedInFull_WithNoExpiry(t *testing.T) {
	t.Parallel()
	pi := &stripego.PaymentIntent{ID: "pi_1", Status: stripego.PaymentIntentStatusSucceeded, Amount: 50000, AmountReceived: 50000,
		Currency: "isk", CaptureMethod: stripego.PaymentIntentCaptureMethodAutomatic, Created: time.Now().Unix()}
	auth, ok := authorizationOf(pi, time.Now())
	require.True(t, ok)
	require.Equal(t, payment.ProviderAuthorization{State: payment.AuthorizationCaptured, Amount: 500, Captured: 500}, auth,
		"in chargeonce's minor units (ISK 500 is Stripe's 50000)")
}

func TestReadAuthorization_NoAuthorization_IsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pc, err := b.provider.CreateCharge(ctx, request("pm_card_chargeDeclined", 1000, "USD"))
	require.NoError(t, err)
	_, err = b.provider.ReadAuthorization(ctx, pc.ID)
	require.ErrorContains(t, err, "holds no authorization")
	require.NotErrorIs(t, err, payment.ErrOutcomeUnknown, "asking again will not help")

	b.fake.Close()
	_, err = b.provider.ReadAuthorization(ctx, pc.ID)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
}
