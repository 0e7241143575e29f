package stripe

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
	"chargeonce/provider/stripe/stripefake"
)

// refusedVoid sends req and requires a refusal with code and one of the
// fixed messages.
func (b *bundle) refusedVoid(t *testing.T, req payment.ProviderVoidRequest, code string) {
	t.Helper()
	v, err := b.provider.VoidCharge(context.Background(), req)
	require.NoError(t, err, "a refusal is an answer")
	require.False(t, v.Succeeded, "%+v", v)
	require.Equal(t, code, v.FailureCode, "%+v", v)
	require.Contains(t, v.FailureMessage, "Nothing was voided.")
}

func TestVoidCharge_Open_CancelsUnderOurKeyAsRequestedByCustomer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	charge := providertest.ManualRequest("pm_card_visa", 1000, "USD")
	pc, err := b.provider.CreateCharge(ctx, charge)
	require.NoError(t, err)
	req := voidRequest(pc.ID)
	v, err := b.provider.VoidCharge(ctx, req)
	require.NoError(t, err)
	require.Equal(t, payment.ProviderVoid{ID: pc.ID + ":void:" + req.AttemptID.String(), Succeeded: true}, v)

	cancels := b.callsTo("/cancel")
	require.Len(t, cancels, 1)
	require.Equal(t, req.IdempotencyKey, cancels[0].IdempotencyKey, "our provider key is Stripe's Idempotency-Key")
	require.Equal(t, "requested_by_customer", cancels[0].Form.Get("cancellation_reason"))
	intent := b.fake.Intents()[0]
	require.Equal(t, "canceled", intent.Status)
	require.Zero(t, intent.AmountCapturable, "the money is released")

	found, err := b.provider.FindVoid(ctx, req)
	require.NoError(t, err)
	require.Equal(t, &v, found)
	b.readAuthorization(t, pc.ID, payment.AuthorizationVoided, 1000, 0)
	// The charge's attempt reads as it is now: an authorization, voided;
	// not a failed payment.
	charges, err := b.provider.FindCharges(ctx, charge)
	require.NoError(t, err)
	require.Len(t, charges, 1)
	require.True(t, charges[0].Succeeded)
	require.Equal(t, payment.AuthorizationVoided, charges[0].Authorization.State)
}

func TestVoidCharge_AfterACapture_RefusedUnsent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 1000, "USD")
	b.captured(t, captureRequest(pc.ID, 400, "USD", false))
	b.refusedVoid(t, voidRequest(pc.ID), payment.FailureChargeCaptured)
	require.Empty(t, b.callsTo("/cancel"), "a cancel would release the other 600, which is no void")
	b.readAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 400)
}

func TestVoidCharge_ThatIsNoAuthorization_Refused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.refusedVoid(t, voidRequest(b.charged(t, "pm_card_visa", 1000, "USD").ID), payment.FailureChargeCaptured)
	declined, err := b.provider.CreateCharge(context.Background(), providertest.ManualRequest("pm_card_chargeDeclined", 1000, "USD"))
	require.NoError(t, err)
	require.False(t, declined.Succeeded)
	b.refusedVoid(t, voidRequest(declined.ID), payment.FailureChargeNotCapturable)
	require.Empty(t, b.callsTo("/cancel"))
}

func TestVoidCharge_Lapsed_RefusedExpired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 1000, "USD")
	require.NoError(t, b.fake.ExpireAuthorization(pc.ID))
	req := voidRequest(pc.ID)
	b.refusedVoid(t, req, payment.FailureAuthorizationExpired)
	found, err := b.provider.FindVoid(context.Background(), req)
	require.NoError(t, err)
	require.Nil(t, found, "Stripe's own cancel of a lapsed authorization is no void")
	b.readAuthorization(t, pc.ID, payment.AuthorizationExpired, 1000, 0)
}

func TestVoidCharge_LostAnswer_FoundAndTheResendIsTheSameVoid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pc := b.authorized(t, 1000, "USD")
	req := voidRequest(pc.ID)
	b.fake.FailCancels(stripefake.CutAfterRun, 1)
	_, err := b.provider.VoidCharge(ctx, req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "Stripe cancelled, the answer was lost")
	found, err := b.provider.FindVoid(ctx, req)
	require.NoError(t, err)
	require.NotNil(t, found)
	again, err := b.provider.VoidCharge(ctx, req)
	require.NoError(t, err)
	require.Equal(t, *found, again)
	require.Len(t, b.callsTo("/cancel"), 1, "voided already: never sent again")
}

func TestVoidCharge_NoDefinitiveAnswer_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	eachFaultWithoutAnswer(t, func(t *testing.T, b *bundle, p *Provider, fault stripefake.Fault) {
		pc := b.authorized(t, 1000, "USD")
		b.fake.FailCancels(fault, 1)
		_, err := p.VoidCharge(context.Background(), voidRequest(pc.ID))
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		require.Len(t, b.callsTo("/cancel"), 1)
	})
}

func TestVoidCharge_Replayed500_SpendsTheKeyOnlyWhenNotCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pc := b.authorized(t, 1000, "USD")
	req := voidRequest(pc.ID)
	b.fake.FailCancels(stripefake.Error500, 1)
	_, err := b.provider.VoidCharge(ctx, req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	_, err = b.provider.VoidCharge(ctx, req)
	require.ErrorIs(t, err, payment.ErrProviderKeySpent, "replayed, and still open: no send under this key can void")
	b.readAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 0)

	cancelled := b.authorized(t, 1000, "USD")
	req = voidRequest(cancelled.ID)
	b.fake.FailCancels(stripefake.Error500AfterCreate, 1)
	_, err = b.provider.VoidCharge(ctx, req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	// Sent again as it was: the replayed 500 is read against the
	// PaymentIntent, which the first send cancelled.
	v, err := b.provider.sendVoid(ctx, req, cancelled.ID)
	require.NoError(t, err)
	require.True(t, v.Succeeded)
}

func TestVoidCharge_AgainstACapture_ExactlyOneWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for range 20 {
		pc := b.authorized(t, 1000, "USD")
		var (
			wg         sync.WaitGroup
			c          payment.ProviderCapture
			v          payment.ProviderVoid
			cErr, vErr error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			c, cErr = b.provider.CaptureCharge(ctx, captureRequest(pc.ID, 1000, "USD", true))
		}()
		go func() { defer wg.Done(); v, vErr = b.provider.VoidCharge(ctx, voidRequest(pc.ID)) }()
		wg.Wait()
		require.NoError(t, cErr)
		require.NoError(t, vErr)
		require.NotEqual(t, c.Succeeded, v.Succeeded, "one wins: %+v %+v", c, v)
		if c.Succeeded {
			require.Equal(t, payment.FailureChargeCaptured, v.FailureCode)
			b.readAuthorization(t, pc.ID, payment.AuthorizationCaptured, 1000, 1000)
		} else {
			require.Equal(t, payment.FailureChargeVoided, c.FailureCode)
			b.readAuthorization(t, pc.ID, payment.AuthorizationVoided, 1000, 0)
		}
	}
}
