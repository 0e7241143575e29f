package cardsim_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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

// TestConformance_AgainstTheSimulator runs the suite through the client
// against the real simulator, over HTTP, on a real database.
func TestConformance_AgainstTheSimulator(t *testing.T) {
	t.Parallel()
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		sim := cardsimtest.Start(t, dbtest.NewPool(t, cardsimtest.Schema), cardsimtest.Options{})
		return providertest.Harness{
			Provider:       simprovider.New(sim.URL, 5*time.Second, nil),
			SucceedingCard: "pm_card_visa",
			DecliningCard:  "pm_card_chargeDeclined",
			DeclineCode:    "card_declined",
			Charges: func(t *testing.T, req payment.ProviderChargeRequest) int {
				return len(sim.Charges(t, apiclient.ProviderChargeFilter{IdempotencyKey: req.IdempotencyKey}))
			},
			// The simulator charges, then drops the connection unanswered.
			LoseOutcome: func(*testing.T) payment.ProviderChargeRequest {
				return providertest.Request("pm_card_lostResponse", 1999, "USD")
			},
			// The shopper presses Complete authentication on the simulator's challenge page.
			AuthenticationCard: "pm_card_authenticationRequired",
			Authenticate: func(t *testing.T, pc payment.ProviderCharge) {
				providertest.PressChallenge(t, nil, pc.Action.URL, "complete")
			},
			Refunds:  true,
			Captures: true,
			// The simulator's control: the authorization lapses now.
			ExpireAuthorization: func(t *testing.T, pc payment.ProviderCharge) {
				sim.ExpireAuthorization(t, pc.ID)
			},
			// The simulator captures, then drops the connection unanswered,
			// for every send of the card's captures.
			LoseCaptureOutcome: func(*testing.T) payment.ProviderChargeRequest {
				return providertest.ManualRequest("pm_card_captureLostResponse", 1999, "USD")
			},
			Cannot: providertest.Cannot{
				SpendKey: "the simulator saves no failure for a key: pm_card_providerError answers 500 before anything is stored, " +
					"on every send alike, so no key is ever spent",
			},
		}
	})
}

// The 3-D Secure cases: pm_card_authenticationRequired, the simulator's card
// that needs authentication.

const returnURL = "https://shop.example/checkout/done?chargeonce_key=checkout-1"

type bundle struct {
	provider *simprovider.Provider
	sim      *cardsimtest.Simulator
}

func setup(t *testing.T, transport http.RoundTripper) bundle {
	t.Helper()
	return setupWith(t, cardsimtest.Options{}, transport)
}

func setupWith(t *testing.T, opts cardsimtest.Options, transport http.RoundTripper) bundle {
	t.Helper()
	sim := cardsimtest.Start(t, dbtest.NewPool(t, cardsimtest.Schema), opts)
	return bundle{provider: simprovider.New(sim.URL, 5*time.Second, transport), sim: sim}
}

func authenticationRequest() payment.ProviderChargeRequest {
	req := providertest.Request("pm_card_authenticationRequired", 1999, "USD")
	req.ReturnURL = returnURL
	return req
}

// waiting creates a charge that waits for the shopper.
func (b bundle) waiting(t *testing.T) (payment.ProviderChargeRequest, payment.ProviderCharge) {
	t.Helper()
	req := authenticationRequest()
	pc, err := b.provider.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.NotNil(t, pc.Action, "%+v", pc)
	return req, pc
}

// press presses a button of the challenge page at challengeURL, as the
// shopper does.
func (b bundle) press(t *testing.T, challengeURL, button string) {
	t.Helper()
	back := providertest.PressChallenge(t, b.sim.API.HTTP, challengeURL, button)
	require.Equal(t, returnURL, back.String())
}

func (b bundle) status(t *testing.T, id string) string {
	t.Helper()
	return b.sim.Charge(t, id).Status
}

func TestCreateCharge_AuthenticationRequiredWithoutReturnURL_FailsAuthenticationRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	pc, err := b.provider.CreateCharge(t.Context(), providertest.Request("pm_card_authenticationRequired", 1999, "USD"))
	require.NoError(t, err, "a decline is an answer")
	require.NotEmpty(t, pc.ID)
	require.False(t, pc.Succeeded)
	require.Nil(t, pc.Action)
	require.Equal(t, payment.FailureAuthenticationRequired, pc.FailureCode)
	require.NotEmpty(t, pc.FailureMessage)
}

func TestCreateCharge_AuthenticationRequiredWithReturnURL_WaitsWithTheChallengePage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req, pc := b.waiting(t)
	require.Equal(t, payment.ProviderCharge{ID: pc.ID, Action: &payment.ProviderAction{URL: b.sim.URL + "/authenticate/" + pc.ID}}, pc)
	require.Equal(t, returnURL, b.sim.Charge(t, pc.ID).ReturnURL, "sent as given")

	again, err := b.provider.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, pc, again, "the same key, the same waiting charge")
	found, err := b.provider.FindCharges(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, []payment.ProviderCharge{pc}, found)
}

func TestCreateCharge_OtherCardWithReturnURL_Succeeds(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req := providertest.Request("pm_card_visa", 1999, "USD")
	req.ReturnURL = returnURL
	pc, err := b.provider.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, payment.ProviderCharge{ID: pc.ID, Succeeded: true}, pc)
}

func TestFindCharges_AfterTheShopperAuthenticated_IsHowItEnded(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, tt := range []struct {
		button string
		want   func(id string) payment.ProviderCharge
	}{
		{"complete", func(id string) payment.ProviderCharge { return payment.ProviderCharge{ID: id, Succeeded: true} }},
		{"fail", func(id string) payment.ProviderCharge {
			return payment.ProviderCharge{ID: id, FailureCode: payment.FailureAuthenticationFailed,
				FailureMessage: "The shopper failed the card's authentication (3-D Secure). The card was not charged."}
		}},
	} {
		req, pc := b.waiting(t)
		b.press(t, pc.Action.URL, tt.button)
		found, err := b.provider.FindCharges(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, []payment.ProviderCharge{tt.want(pc.ID)}, found, tt.button)
		again, err := b.provider.CreateCharge(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, tt.want(pc.ID), again, "%s: a replay answers the charge as it ended", tt.button)
	}
}

func TestCancelCharge_Waiting_IsAbandoned(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req, pc := b.waiting(t)
	canceled, err := b.provider.CancelCharge(t.Context(), req, pc.ID)
	require.NoError(t, err)
	want := payment.ProviderCharge{ID: pc.ID, FailureCode: payment.FailureAuthenticationAbandoned,
		FailureMessage: "The payment was cancelled: the shopper did not authenticate in time."}
	require.Equal(t, want, canceled)
	require.Equal(t, "canceled", b.status(t, pc.ID))

	found, err := b.provider.FindCharges(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, []payment.ProviderCharge{want}, found)
	again, err := b.provider.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, want, again)
	// Cancelling again finds it cancelled.
	twice, err := b.provider.CancelCharge(t.Context(), req, pc.ID)
	require.NoError(t, err)
	require.Equal(t, want, twice)
}

func TestCancelCharge_ShopperFinishedFirst_IsThePaymentAsItEnded(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req, pc := b.waiting(t)
	b.press(t, pc.Action.URL, "complete")
	got, err := b.provider.CancelCharge(t.Context(), req, pc.ID)
	require.NoError(t, err)
	require.Equal(t, payment.ProviderCharge{ID: pc.ID, Succeeded: true}, got)
	require.Equal(t, "succeeded", b.status(t, pc.ID), "the refused cancel changed nothing")

	req, pc = b.waiting(t)
	b.press(t, pc.Action.URL, "fail")
	got, err = b.provider.CancelCharge(t.Context(), req, pc.ID)
	require.NoError(t, err)
	require.False(t, got.Succeeded)
	require.Equal(t, payment.FailureAuthenticationFailed, got.FailureCode)
	require.Equal(t, "failed", b.status(t, pc.ID))
}

// completeBeforeCancel is a transport on which the shopper completes the
// challenge just as chargeonce's cancel leaves: the charge waited when
// CancelCharge found it, and no longer does when the cancel arrives.
type completeBeforeCancel struct {
	t    *testing.T
	b    *bundle
	next http.RoundTripper
}

func (c completeBeforeCancel) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, charge, _ := strings.Cut(req.URL.Path, "/v1/charges/"); strings.HasSuffix(charge, "/cancel") {
		id := strings.TrimSuffix(charge, "/cancel")
		c.b.press(c.t, c.b.sim.URL+"/authenticate/"+id, "complete")
	}
	return c.next.RoundTrip(req)
}

func TestCancelCharge_ShopperCompletesDuringTheCancel_IsSucceeded(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	raced := b
	raced.provider = simprovider.New(b.sim.URL, 5*time.Second, completeBeforeCancel{t: t, b: &b, next: http.DefaultTransport})
	req, pc := b.waiting(t)
	got, err := raced.provider.CancelCharge(t.Context(), req, pc.ID)
	require.NoError(t, err)
	require.Equal(t, payment.ProviderCharge{ID: pc.ID, Succeeded: true}, got)
}

func TestCancelCharge_NoSuchCharge_IsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.provider.CancelCharge(t.Context(), authenticationRequest(), "ch_nosuchcharge")
	require.Error(t, err)
}

// failingCancel answers every cancel with status, or drops it (status 0),
// and passes every other request on.
type failingCancel struct {
	status int
	next   http.RoundTripper
}

func (f failingCancel) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/cancel") {
		return f.next.RoundTrip(req)
	}
	if f.status == 0 {
		return nil, errors.New("connection reset by peer")
	}
	return &http.Response{StatusCode: f.status, Body: io.NopCloser(strings.NewReader(`{"error":{"type":"api_error","code":"internal_error"}}`)),
		Header: http.Header{"Content-Type": {"application/json"}}, Request: req}, nil
}

func TestCancelCharge_NoAnswerOr5xx_IsAnErrorAndTheChargeStillWaits(t *testing.T) {
	t.Parallel()
	for _, status := range []int{0, http.StatusInternalServerError, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, failingCancel{status: status, next: http.DefaultTransport})
			req, pc := b.waiting(t)
			_, err := b.provider.CancelCharge(t.Context(), req, pc.ID)
			require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "nobody knows yet")
			require.Equal(t, "requires_action", b.status(t, pc.ID))
		})
	}
}

// Refunds: the simulator's cards pm_card_refundPending and
// pm_card_refundFailsLater, its refusals, and the lookups of FindRefund.

// settleQuickly is the simulator's refund settle time in the tests that
// wait for a pending refund to end; long enough that the answer to the
// create still finds it pending, even under -race.
const settleQuickly = time.Second

// charged charges paymentMethod 1999 USD and returns the charge's id,
// succeeded or not.
func (b bundle) charged(t *testing.T, paymentMethod string) string {
	t.Helper()
	pc, err := b.provider.CreateCharge(t.Context(), providertest.Request(paymentMethod, 1999, "USD"))
	require.NoError(t, err)
	require.NotEmpty(t, pc.ID)
	return pc.ID
}

func (b bundle) refunded(t *testing.T, chargeID string, amount int64) (payment.ProviderRefundRequest, payment.ProviderRefund) {
	t.Helper()
	req := providertest.RefundRequest(chargeID, amount, "USD")
	pr, err := b.provider.CreateRefund(t.Context(), req)
	require.NoError(t, err)
	require.NotEmpty(t, pr.ID)
	return req, pr
}

// eventually requires that FindRefund of req soon finds want.
func (b bundle) eventually(t *testing.T, req payment.ProviderRefundRequest, want payment.ProviderRefund) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		found, err := b.provider.FindRefund(t.Context(), req)
		if assert.NoError(c, err) && assert.NotNil(c, found) {
			assert.Equal(c, want, *found)
		}
	}, 10*time.Second, 20*time.Millisecond)
}

const expiredCardMessage = "The refund failed: the card it went back to is expired or canceled."

func TestCreateRefund_RefundPendingCard_IsPendingThenSucceeded(t *testing.T) {
	t.Parallel()
	b := setupWith(t, cardsimtest.Options{RefundSettle: settleQuickly}, nil)
	req, pr := b.refunded(t, b.charged(t, "pm_card_refundPending"), 1999)
	require.Equal(t, payment.ProviderRefund{ID: pr.ID, State: payment.RefundPending}, pr)
	b.eventually(t, req, payment.ProviderRefund{ID: pr.ID, State: payment.RefundSucceeded})
	again, err := b.provider.CreateRefund(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, payment.ProviderRefund{ID: pr.ID, State: payment.RefundSucceeded}, again, "a replay answers the refund as it is now")
}

func TestCreateRefund_RefundFailsLaterCard_FirstFailsThenAnotherSucceeds(t *testing.T) {
	t.Parallel()
	b := setupWith(t, cardsimtest.Options{RefundSettle: settleQuickly}, nil)
	chargeID := b.charged(t, "pm_card_refundFailsLater")
	req, pr := b.refunded(t, chargeID, 1999)
	require.Equal(t, payment.RefundPending, pr.State)
	b.eventually(t, req, payment.ProviderRefund{ID: pr.ID, State: payment.RefundFailed,
		FailureCode: "expired_or_canceled_card", FailureMessage: expiredCardMessage})
	_, second := b.refunded(t, chargeID, 1999)
	require.Equal(t, payment.ProviderRefund{ID: second.ID, State: payment.RefundSucceeded}, second,
		"the failed refund gave the whole amount back")
}

func TestCreateRefund_Refused_IsAFailedRefundWithTheCode(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	visa := b.charged(t, "pm_card_visa")
	for _, tt := range []struct {
		name     string
		chargeID string
		amount   int64
		code     string
	}{
		{"declined charge", b.charged(t, "pm_card_chargeDeclined"), 1999, "charge_not_refundable"},
		{"more than the charge", visa, 2000, "amount_too_large"},
		{"unknown charge", "ch_doesNotExist", 100, "resource_missing"},
	} {
		req := providertest.RefundRequest(tt.chargeID, tt.amount, "USD")
		pr, err := b.provider.CreateRefund(t.Context(), req)
		require.NoError(t, err, "%s: a refusal is an answer", tt.name)
		require.Equal(t, payment.RefundFailed, pr.State, tt.name)
		require.Empty(t, pr.ID, "%s: no refund was made", tt.name)
		require.Equal(t, tt.code, pr.FailureCode, tt.name)
		require.NotEmpty(t, pr.FailureMessage, tt.name)
		found, err := b.provider.FindRefund(t.Context(), req)
		require.NoError(t, err)
		require.Nil(t, found, "%s: nothing is stored for a refusal", tt.name)
	}
}

func TestCreateRefund_SameKeyOtherAmount_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req, _ := b.refunded(t, b.charged(t, "pm_card_visa"), 500)
	req.Amount = 600
	_, err := b.provider.CreateRefund(t.Context(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "409: the key is the simulator's, whatever it holds")
}

// failing answers the requests of method to path (/v1/refunds, say) with
// status, or drops them unsent (status 0), or sends them and loses the
// answer (lose), and passes every other request on.
type failing struct {
	method string
	path   string
	status int
	lose   bool
	next   http.RoundTripper
}

func (f failing) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != f.method || !strings.HasSuffix(req.URL.Path, f.path) {
		return f.next.RoundTrip(req)
	}
	if f.lose {
		resp, err := f.next.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return nil, errors.New("connection reset by peer")
	}
	if f.status == 0 {
		return nil, errors.New("connection reset by peer")
	}
	return &http.Response{StatusCode: f.status, Body: io.NopCloser(strings.NewReader(`{"error":{"type":"api_error","code":"internal_error"}}`)),
		Header: http.Header{"Content-Type": {"application/json"}}, Request: req}, nil
}

func TestCreateRefund_NoAnswerOr5xx_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, status := range []int{0, http.StatusInternalServerError, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, failing{method: http.MethodPost, path: "/v1/refunds", status: status, next: http.DefaultTransport})
			_, err := b.provider.CreateRefund(t.Context(), providertest.RefundRequest(b.charged(t, "pm_card_visa"), 1999, "USD"))
			require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "nobody knows yet")
		})
	}
}

func TestCreateRefund_AnswerLost_IsOutcomeUnknownAndFindRefundFindsIt(t *testing.T) {
	t.Parallel()
	b := setup(t, failing{method: http.MethodPost, path: "/v1/refunds", lose: true, next: http.DefaultTransport})
	req := providertest.RefundRequest(b.charged(t, "pm_card_visa"), 1999, "USD")
	_, err := b.provider.CreateRefund(t.Context(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	found, err := b.provider.FindRefund(t.Context(), req)
	require.NoError(t, err)
	require.NotNil(t, found, "the refund was made")
	require.Equal(t, payment.RefundSucceeded, found.State)
}

func TestFindRefund_UnderAnEarlierKey_IsFoundByTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	chargeID := b.charged(t, "pm_card_visa")
	req, pr := b.refunded(t, chargeID, 500)
	b.refunded(t, chargeID, 600) // another attempt's refund of the same charge

	rekeyed := req
	rekeyed.IdempotencyKey = req.IdempotencyKey + "_2"
	found, err := b.provider.FindRefund(t.Context(), rekeyed)
	require.NoError(t, err)
	require.Equal(t, &pr, found)

	found, err = b.provider.FindRefund(t.Context(), providertest.RefundRequest(chargeID, 500, "USD"))
	require.NoError(t, err)
	require.Nil(t, found, "no refund of the charge names that attempt")
}

func TestFindRefund_LookupFails_IsAnError(t *testing.T) {
	t.Parallel()
	for _, status := range []int{0, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, failing{method: http.MethodGet, path: "/v1/refunds", status: status, next: http.DefaultTransport})
			req, _ := b.refunded(t, b.charged(t, "pm_card_visa"), 1999)
			found, err := b.provider.FindRefund(t.Context(), req)
			require.Error(t, err)
			require.Nil(t, found)
		})
	}
}

func TestFindRefund_FailedAfterItSucceeded_IsFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req, pr := b.refunded(t, b.charged(t, "pm_card_visa"), 1999)
	require.Equal(t, payment.RefundSucceeded, pr.State)
	// The card is closed: the simulator's control fails the refund.
	resp, err := b.sim.API.HTTP.Post(b.sim.URL+"/v1/refunds/"+pr.ID+"/fail", "", nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	want := payment.ProviderRefund{ID: pr.ID, State: payment.RefundFailed,
		FailureCode: "expired_or_canceled_card", FailureMessage: expiredCardMessage}
	found, err := b.provider.FindRefund(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, &want, found)
	again, err := b.provider.CreateRefund(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, want, again, "the same key, the same refund, as it now is")
}
