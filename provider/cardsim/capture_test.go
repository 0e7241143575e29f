package cardsim_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
	"chargeonce/provider/providertest"
)

// The cases of captures and voids that only the simulator shows; the
// conformance suite holds the rest.

// authorized authorizes amount USD on paymentMethod.
func (b bundle) authorized(t *testing.T, paymentMethod string, amount int64) payment.ProviderCharge {
	t.Helper()
	pc, err := b.provider.CreateCharge(t.Context(), providertest.ManualRequest(paymentMethod, amount, "USD"))
	require.NoError(t, err)
	require.NotNil(t, pc.Authorization, "%+v", pc)
	return pc
}

func TestCreateCharge_Manual_SendsTheCaptureMethod(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	pc := b.authorized(t, "pm_card_visa", 1000)
	at := b.sim.Charge(t, pc.ID)
	require.Equal(t, "manual", at.CaptureMethod)
	require.Equal(t, "open", at.AuthorizationStatus)
	require.Equal(t, pc.Authorization.ExpiresAt, time.Unix(at.AuthorizationExpiresAt, 0).UTC())

	auto, err := b.provider.CreateCharge(t.Context(), providertest.Request("pm_card_visa", 1000, "USD"))
	require.NoError(t, err)
	require.Equal(t, "automatic", b.sim.Charge(t, auto.ID).CaptureMethod, "nothing said: automatic")
}

func TestCaptureCharge_LostAnswer_IsOneCaptureAtTheSimulator(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	pc := b.authorized(t, "pm_card_captureLostResponse", 1000)
	req := providertest.CaptureRequest(pc.ID, 1000, "USD", true)
	for range 3 { // the first send, then resends under the same key
		_, err := b.provider.CaptureCharge(t.Context(), req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	}
	made := b.sim.Captures(t, apiclient.ProviderCaptureFilter{AttemptID: req.AttemptID.String()})
	require.Len(t, made, 1, "one capture, however often it was sent")
	require.Equal(t, req.IdempotencyKey, made[0].IdempotencyKey)
	found, err := b.provider.FindCapture(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, &payment.ProviderCapture{ID: made[0].ID, Succeeded: true}, found)
}

func TestCaptureCharge_NoAnswerOr5xx_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, status := range []int{0, http.StatusInternalServerError, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, failing{method: http.MethodPost, path: "/v1/captures", status: status, next: http.DefaultTransport})
			pc := b.authorized(t, "pm_card_visa", 1000)
			_, err := b.provider.CaptureCharge(t.Context(), providertest.CaptureRequest(pc.ID, 1000, "USD", true))
			require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "nobody knows yet")
		})
	}
}

func TestCaptureCharge_Timeout_IsOutcomeUnknown_ThenFoundMade(t *testing.T) {
	t.Parallel()
	sim := cardsimtest.Start(t, dbtest.NewPool(t, cardsimtest.Schema), cardsimtest.Options{SlowDelay: time.Second})
	b := bundle{provider: simprovider.New(sim.URL, 200*time.Millisecond, nil), sim: sim}
	pc := b.authorized(t, "pm_card_captureSlow", 1000)
	req := providertest.CaptureRequest(pc.ID, 1000, "USD", true)
	_, err := b.provider.CaptureCharge(t.Context(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "the client gave up first")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		found, err := b.provider.FindCapture(t.Context(), req)
		require.NoError(c, err)
		require.NotNil(c, found, "the simulator went on without the client")
		require.True(c, found.Succeeded)
	}, 10*time.Second, 50*time.Millisecond)
}

func TestCaptureCharge_DeclinedCard_IsAFailedCaptureWithTheCardsCode(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	pc := b.authorized(t, "pm_card_captureDeclined", 1000)
	req := providertest.CaptureRequest(pc.ID, 1000, "USD", true)
	declined, err := b.provider.CaptureCharge(t.Context(), req)
	require.NoError(t, err, "a decline is an answer")
	require.False(t, declined.Succeeded)
	require.Equal(t, "card_declined", declined.FailureCode)
	require.NotEmpty(t, declined.FailureMessage)
	require.NotEmpty(t, declined.ID, "the declined capture, as stored")
	found, err := b.provider.FindCapture(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, &declined, found)
	pa, err := b.provider.ReadAuthorization(t.Context(), pc.ID)
	require.NoError(t, err)
	require.Equal(t, payment.AuthorizationOpen, pa.State, "nothing captured")
	require.Zero(t, pa.Captured)
}

func TestFindCapture_UnderAnEarlierKey_IsFoundByTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	pc := b.authorized(t, "pm_card_visa", 1000)
	req := providertest.CaptureRequest(pc.ID, 400, "USD", false)
	made, err := b.provider.CaptureCharge(t.Context(), req)
	require.NoError(t, err)
	_, err = b.provider.CaptureCharge(t.Context(), providertest.CaptureRequest(pc.ID, 300, "USD", false)) // another attempt's
	require.NoError(t, err)

	rekeyed := req
	rekeyed.IdempotencyKey += "_2"
	found, err := b.provider.FindCapture(t.Context(), rekeyed)
	require.NoError(t, err)
	require.Equal(t, &made, found)

	found, err = b.provider.FindCapture(t.Context(), providertest.CaptureRequest(pc.ID, 400, "USD", false))
	require.NoError(t, err)
	require.Nil(t, found, "no capture of the charge names that attempt")
}

func TestFindVoid_UnderAnEarlierKey_IsFoundByTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	pc := b.authorized(t, "pm_card_visa", 1000)
	req := providertest.VoidRequest(pc.ID)
	made, err := b.provider.VoidCharge(t.Context(), req)
	require.NoError(t, err)
	rekeyed := req
	rekeyed.IdempotencyKey += "_2"
	found, err := b.provider.FindVoid(t.Context(), rekeyed)
	require.NoError(t, err)
	require.Equal(t, &made, found)
}

func TestVoidCharge_NoAnswerOr5xx_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, status := range []int{0, http.StatusBadGateway} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, failing{method: http.MethodPost, path: "/v1/voids", status: status, next: http.DefaultTransport})
			pc := b.authorized(t, "pm_card_visa", 1000)
			_, err := b.provider.VoidCharge(t.Context(), providertest.VoidRequest(pc.ID))
			require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		})
	}
}

func TestFindCaptureAndVoid_LookupFails_IsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, failing{method: http.MethodGet, path: "/v1/captures", status: http.StatusInternalServerError, next: http.DefaultTransport})
	pc := b.authorized(t, "pm_card_visa", 1000)
	found, err := b.provider.FindCapture(t.Context(), providertest.CaptureRequest(pc.ID, 1000, "USD", true))
	require.Error(t, err)
	require.NotErrorIs(t, err, payment.ErrOutcomeUnknown, "a read that failed is no capture's outcome")
	require.Nil(t, found)

	b = setup(t, failing{method: http.MethodGet, path: "/v1/voids", status: 0, next: http.DefaultTransport})
	pc = b.authorized(t, "pm_card_visa", 1000)
	voidFound, err := b.provider.FindVoid(t.Context(), providertest.VoidRequest(pc.ID))
	require.Error(t, err)
	require.Nil(t, voidFound)
}

func TestReadAuthorization_NoAuthorization_IsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	auto, err := b.provider.CreateCharge(t.Context(), providertest.Request("pm_card_visa", 1000, "USD"))
	require.NoError(t, err)
	_, err = b.provider.ReadAuthorization(t.Context(), auto.ID)
	require.ErrorContains(t, err, "no authorization")
	_, err = b.provider.ReadAuthorization(t.Context(), "ch_nothing")
	require.Error(t, err)
}
