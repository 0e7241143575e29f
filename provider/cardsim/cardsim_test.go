package cardsim_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/cardsim"
	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
	"chargeonce/provider/providertest"
)

// TestConformance_AgainstTheSimulator runs the suite through the client
// against the real simulator, over HTTP, on a real database.
func TestConformance_AgainstTheSimulator(t *testing.T) {
	t.Parallel()
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		pool := dbtest.NewPool(t, cardsimtest.Schema)
		sim := httptest.NewServer(cardsim.NewHandler(pool, cardsim.Config{}))
		t.Cleanup(sim.Close)
		return providertest.Harness{
			Provider:       simprovider.New(sim.URL, 5*time.Second, nil),
			SucceedingCard: "pm_card_visa",
			DecliningCard:  "pm_card_chargeDeclined",
			DeclineCode:    "card_declined",
			Charges: func(t *testing.T, req payment.ProviderChargeRequest) int {
				var n int
				require.NoError(t, pool.QueryRow(t.Context(),
					"SELECT count(*) FROM cardsim.charges WHERE idempotency_key = $1", req.IdempotencyKey).Scan(&n))
				return n
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
	sim      *httptest.Server
	pool     *pgxpool.Pool
}

func setup(t *testing.T, transport http.RoundTripper) bundle {
	t.Helper()
	pool := dbtest.NewPool(t, cardsimtest.Schema)
	sim := httptest.NewServer(cardsim.NewHandler(pool, cardsim.Config{}))
	t.Cleanup(sim.Close)
	return bundle{provider: simprovider.New(sim.URL, 5*time.Second, transport), sim: sim, pool: pool}
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
	back := providertest.PressChallenge(t, b.sim.Client(), challengeURL, button)
	require.Equal(t, returnURL, back.String())
}

func (b bundle) status(t *testing.T, id string) string {
	t.Helper()
	var status string
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT status FROM cardsim.charges WHERE id = $1", id).Scan(&status))
	return status
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
	var stored string
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT return_url FROM cardsim.charges WHERE id = $1", pc.ID).Scan(&stored))
	require.Equal(t, returnURL, stored, "sent as given")

	again, err := b.provider.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, pc, again, "the same key, the same waiting charge")
	found, err := b.provider.FindCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, &pc, found)
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

func TestFindCharge_AfterTheShopperAuthenticated_IsHowItEnded(t *testing.T) {
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
		found, err := b.provider.FindCharge(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, tt.want(pc.ID), *found, tt.button)
		again, err := b.provider.CreateCharge(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, tt.want(pc.ID), again, "%s: a replay answers the charge as it ended", tt.button)
	}
}

func TestCancelCharge_Waiting_IsAbandoned(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req, pc := b.waiting(t)
	canceled, err := b.provider.CancelCharge(t.Context(), req)
	require.NoError(t, err)
	want := payment.ProviderCharge{ID: pc.ID, FailureCode: payment.FailureAuthenticationAbandoned,
		FailureMessage: "The payment was cancelled: the shopper did not authenticate in time."}
	require.Equal(t, want, canceled)
	require.Equal(t, "canceled", b.status(t, pc.ID))

	found, err := b.provider.FindCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, &want, found)
	again, err := b.provider.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, want, again)
	// Cancelling again finds it cancelled.
	twice, err := b.provider.CancelCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, want, twice)
}

func TestCancelCharge_ShopperFinishedFirst_IsThePaymentAsItEnded(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req, pc := b.waiting(t)
	b.press(t, pc.Action.URL, "complete")
	got, err := b.provider.CancelCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, payment.ProviderCharge{ID: pc.ID, Succeeded: true}, got)
	require.Equal(t, "succeeded", b.status(t, pc.ID), "the refused cancel changed nothing")

	req, pc = b.waiting(t)
	b.press(t, pc.Action.URL, "fail")
	got, err = b.provider.CancelCharge(t.Context(), req)
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
	if id, ok := strings.CutSuffix(strings.TrimPrefix(req.URL.Path, "/v1/charges/"), "/cancel"); ok {
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
	got, err := raced.provider.CancelCharge(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, payment.ProviderCharge{ID: pc.ID, Succeeded: true}, got)
}

func TestCancelCharge_NoChargeForTheKey_IsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.provider.CancelCharge(t.Context(), authenticationRequest())
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
			_, err := b.provider.CancelCharge(t.Context(), req)
			require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "nobody knows yet")
			require.Equal(t, "requires_action", b.status(t, pc.ID))
		})
	}
}
