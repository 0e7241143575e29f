// Package providertest is the conformance suite of payment.Provider, in the
// style of River's riverdrivertest: every implementation, real or fake,
// passes the same cases (Run) from its own _test.go, through a Harness that
// builds it and says how to observe it. A behaviour that an implementation
// cannot show is named in the harness's Cannot with the reason, and its case
// is skipped with that reason; no case passes without asserting. Memory,
// an in-memory provider with the card simulator's behaviours, passes every
// case, and stands in for a provider where a test wants one without HTTP or
// a database: in package payment's own tests.
package providertest

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/payment"
)

// Harness is one provider under test and what the suite needs to drive and
// observe it. Run builds a new one for every case.
type Harness struct {
	// Provider is the implementation under test.
	Provider payment.Provider
	// SucceedingCard is a payment method the provider charges;
	// DecliningCard one it declines, with the failure code DeclineCode.
	SucceedingCard string
	DecliningCard  string
	DeclineCode    string
	// Charges counts the charges the provider holds for req, where the
	// harness can see them.
	Charges func(t *testing.T, req payment.ProviderChargeRequest) int
	// LoseOutcome returns a request whose next CreateCharge gets no
	// definitive answer (a lost response, a 5xx), arranging it if needed.
	LoseOutcome func(t *testing.T) payment.ProviderChargeRequest
	// SpendKey returns a request whose first send makes the provider save a
	// failure for its key, replayed on every later send, with no charge
	// made, arranging it if needed.
	SpendKey func(t *testing.T) payment.ProviderChargeRequest
	// AuthenticationCard is a payment method that needs the shopper to
	// authenticate (3-D Secure); Authenticate completes the challenge of
	// pc, a payment that waits for it, as the shopper would.
	AuthenticationCard string
	Authenticate       func(t *testing.T, pc payment.ProviderCharge)
	// Refunds puts the provider's refunds (CreateRefund, FindRefund) under
	// test; unset, every refund case is skipped. A provider whose refunds
	// are still being built leaves it unset until they pass.
	Refunds bool
	// Captures puts the provider's authorizations, captures and voids
	// (CreateCharge with payment.CaptureManual, CaptureCharge, FindCapture,
	// VoidCharge, FindVoid, ReadAuthorization) under test; unset, every
	// capture case is skipped, as with Refunds.
	Captures bool
	// ExpireAuthorization makes pc, an open authorization, lapse, waiting
	// for its window to pass if it must; once it returns, the provider
	// holds pc's authorization as expired.
	ExpireAuthorization func(t *testing.T, pc payment.ProviderCharge)
	// LoseCaptureOutcome returns a charge request (payment.CaptureManual)
	// whose authorization's captures are made but get no definitive answer
	// (a lost response, a 5xx), at least the first of them; arranging it if
	// needed.
	LoseCaptureOutcome func(t *testing.T) payment.ProviderChargeRequest
	// Cannot says why the provider cannot show a behaviour.
	Cannot Cannot
}

// Cannot holds, for each behaviour a provider cannot show, the reason: a
// case that needs it is skipped with that reason. A behaviour with a
// function in Harness needs a reason here exactly when the function is nil.
type Cannot struct {
	// Deduplicate: a repeat of our provider key does not answer the first
	// send's charge (or refund).
	Deduplicate string
	// FindAfterCharge: FindCharges does not find a charge that was made.
	FindAfterCharge string
	// Decline: no card is declined, or not so that it shows.
	Decline string
	// CountCharges: Harness.Charges is nil.
	CountCharges string
	// LoseOutcome: Harness.LoseOutcome is nil.
	LoseOutcome string
	// SpendKey: Harness.SpendKey is nil.
	SpendKey string
	// Authenticate: Harness.AuthenticationCard and Authenticate are unset:
	// no card of the provider waits for the shopper.
	Authenticate string
	// FindAfterRefund: FindRefund does not find a refund that was made.
	FindAfterRefund string
	// RefuseRefund: the provider does not refuse a refund of more than the
	// charge.
	RefuseRefund string
	// ExpireAuthorization: Harness.ExpireAuthorization is nil. Like
	// LoseCaptureOutcome, it is required only of a harness with Captures.
	ExpireAuthorization string
	// LoseCaptureOutcome: Harness.LoseCaptureOutcome is nil.
	LoseCaptureOutcome string
}

// Run runs every case against a provider that newHarness builds, one per
// case, the cases in parallel.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range slices.Concat(cases, captureCases) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.check(t)
			c.run(t, h)
		})
	}
}

// Request is the charge request of a fresh attempt, as payment makes it:
// our provider key, the attempt, and the metadata that names them.
func Request(paymentMethod string, amount int64, currency string) payment.ProviderChargeRequest {
	id := uuid.New()
	return payment.ProviderChargeRequest{
		IdempotencyKey:   "chargeonce_" + id.String(),
		AttemptID:        id,
		AttemptCreatedAt: time.Now(),
		Amount:           amount,
		Currency:         currency,
		PaymentMethod:    paymentMethod,
		Description:      "Order 42",
		Metadata: map[string]string{
			"chargeonce_attempt_id": id.String(), "client_idempotency_key": "checkout-" + id.String()[:8],
			"merchant": "demo", "order_id": "order-42",
		},
	}
}

// RefundRequest is the request of a fresh refund attempt of amount of the
// charge chargeID, as payment makes it: our provider key, the attempt, and
// the metadata that names them.
func RefundRequest(chargeID string, amount int64, currency string) payment.ProviderRefundRequest {
	id := uuid.New()
	return payment.ProviderRefundRequest{
		IdempotencyKey:   "chargeonce_" + id.String(),
		AttemptID:        id,
		AttemptCreatedAt: time.Now(),
		ProviderChargeID: chargeID,
		Amount:           amount,
		Currency:         currency,
		Reason:           "Returned item",
		Metadata: map[string]string{
			"chargeonce_attempt_id": id.String(), "chargeonce_kind": "refund",
			"client_idempotency_key": "refund-" + id.String()[:8], "merchant": "demo",
		},
	}
}

// check refuses a harness that neither offers a behaviour nor says why not,
// or does both.
func (h Harness) check(t *testing.T) {
	t.Helper()
	require.NotNil(t, h.Provider, "providertest: Harness.Provider")
	require.NotEmpty(t, h.SucceedingCard, "providertest: Harness.SucceedingCard")
	if h.Cannot.Decline == "" {
		require.NotEmpty(t, h.DecliningCard, "providertest: Harness.DecliningCard, or Cannot.Decline")
		require.NotEmpty(t, h.DeclineCode, "providertest: Harness.DeclineCode, or Cannot.Decline")
	}
	for _, f := range []struct {
		name   string
		has    bool
		reason string
	}{
		{"Charges", h.Charges != nil, h.Cannot.CountCharges},
		{"LoseOutcome", h.LoseOutcome != nil, h.Cannot.LoseOutcome},
		{"SpendKey", h.SpendKey != nil, h.Cannot.SpendKey},
		{"Authenticate", h.Authenticate != nil && h.AuthenticationCard != "", h.Cannot.Authenticate},
	} {
		require.True(t, f.has != (f.reason != ""),
			"providertest: Harness.%s must be set, or else a reason given in Cannot, not both", f.name)
	}
	h.checkCaptures(t)
}

// charge charges the succeeding card of a fresh attempt.
func (h Harness) charge(t *testing.T) (payment.ProviderChargeRequest, payment.ProviderCharge) {
	t.Helper()
	req := Request(h.SucceedingCard, 1999, "USD")
	pc, err := h.Provider.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.True(t, pc.Succeeded, "%+v", pc)
	require.NotEmpty(t, pc.ID)
	return req, pc
}

// refund charges the succeeding card of a fresh attempt and refunds all
// of it, which must succeed.
func (h Harness) refund(t *testing.T) (payment.ProviderRefundRequest, payment.ProviderRefund) {
	t.Helper()
	req, pc := h.charge(t)
	refundReq := RefundRequest(pc.ID, req.Amount, req.Currency)
	pr, err := h.Provider.CreateRefund(t.Context(), refundReq)
	require.NoError(t, err)
	require.Equal(t, payment.RefundSucceeded, pr.State, "%+v", pr)
	require.NotEmpty(t, pr.ID)
	require.Empty(t, pr.FailureCode)
	return refundReq, pr
}

// skipUnlessRefunds skips a refund case unless the harness puts refunds
// under test, and then as skipUnless.
func skipUnlessRefunds(t *testing.T, h Harness, reason string) {
	t.Helper()
	if !h.Refunds {
		t.Skip("Harness.Refunds is unset: the provider's refunds are not under test")
	}
	skipUnless(t, reason)
}

// waiting creates a payment of the card that needs authentication, with a
// return URL, and requires that it waits for the shopper.
func (h Harness) waiting(t *testing.T) (payment.ProviderChargeRequest, payment.ProviderCharge) {
	t.Helper()
	req := Request(h.AuthenticationCard, 1999, "USD")
	req.ReturnURL = "https://shop.example/checkout/return?" + payment.ReturnKeyParam + "=" + req.Metadata["client_idempotency_key"]
	pc, err := h.Provider.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.NotNil(t, pc.Action, "the payment waits for the shopper: %+v", pc)
	require.NotEmpty(t, pc.Action.URL)
	require.False(t, pc.Succeeded)
	require.Empty(t, pc.FailureCode, "waiting is neither success nor failure")
	return req, pc
}

// skipUnless skips the case with reason, if there is one.
func skipUnless(t *testing.T, reason string) {
	t.Helper()
	if reason != "" {
		t.Skip(reason)
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, h Harness)
}{
	{"CreateCharge_SameProviderKeyTwice_IsOneCharge", func(t *testing.T, h Harness) {
		skipUnless(t, h.Cannot.Deduplicate)
		req, first := h.charge(t)
		again, err := h.Provider.CreateCharge(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, first, again, "the same key gets the same charge")
		if h.Charges == nil {
			t.Logf("the charges at the provider are not counted: %s", h.Cannot.CountCharges)
			return
		}
		require.Equal(t, 1, h.Charges(t, req), "one charge at the provider")
	}},
	{"FindCharges_BeforeTheCharge_IsNone", func(t *testing.T, h Harness) {
		found, err := h.Provider.FindCharges(t.Context(), Request(h.SucceedingCard, 1999, "USD"))
		require.NoError(t, err)
		require.Empty(t, found, "the provider holds no charge for a request never sent")
	}},
	{"FindCharges_AfterTheCharge_IsTheSameCharge", func(t *testing.T, h Harness) {
		skipUnless(t, h.Cannot.FindAfterCharge)
		req, pc := h.charge(t)
		found, err := h.Provider.FindCharges(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, []payment.ProviderCharge{pc}, found)
	}},
	{"FindCharges_TwoChargesOfOneAttempt_AreBothFound_OldestFirst", func(t *testing.T, h Harness) {
		// Which charge is the attempt's, and which are duplicates to refund,
		// is payment's to decide (settleOn): a provider must show them all.
		skipUnless(t, h.Cannot.FindAfterCharge)
		req, first := h.charge(t)
		stray := req // a stray send of the same attempt, under another key
		stray.IdempotencyKey += "_stray"
		second, err := h.Provider.CreateCharge(t.Context(), stray)
		require.NoError(t, err)
		require.True(t, second.Succeeded, "%+v", second)
		require.NotEqual(t, first.ID, second.ID, "another key, another charge")
		found, err := h.Provider.FindCharges(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, []payment.ProviderCharge{first, second}, found)
	}},
	{"CreateCharge_NoDefinitiveAnswer_IsOutcomeUnknown", func(t *testing.T, h Harness) {
		skipUnless(t, h.Cannot.LoseOutcome)
		_, err := h.Provider.CreateCharge(t.Context(), h.LoseOutcome(t))
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		require.NotErrorIs(t, err, payment.ErrProviderKeySpent, "the charge may exist")
	}},
	{"CreateCharge_SavedFailureReplayed_SpendsTheKey", func(t *testing.T, h Harness) {
		skipUnless(t, h.Cannot.SpendKey)
		ctx := t.Context()
		req := h.SpendKey(t)
		_, err := h.Provider.CreateCharge(ctx, req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "a first failure may still be anything")
		require.NotErrorIs(t, err, payment.ErrProviderKeySpent)
		_, err = h.Provider.CreateCharge(ctx, req)
		require.ErrorIs(t, err, payment.ErrProviderKeySpent, "the saved failure, replayed, and no charge")
		require.NotErrorIs(t, err, payment.ErrOutcomeUnknown)
		found, err := h.Provider.FindCharges(ctx, req)
		require.NoError(t, err)
		require.Empty(t, found, "a spent key made no charge")
		if h.Charges != nil {
			require.Zero(t, h.Charges(t, req), "no charge at the provider")
		}
	}},
	{"CreateCharge_NeedsAuthentication_WithoutReturnURL_FailsAuthenticationRequired", func(t *testing.T, h Harness) {
		skipUnless(t, h.Cannot.Authenticate)
		pc, err := h.Provider.CreateCharge(t.Context(), Request(h.AuthenticationCard, 1999, "USD"))
		require.NoError(t, err, "a card that cannot authenticate is an answer")
		require.Nil(t, pc.Action, "nowhere to send the shopper back to: it never waits")
		require.False(t, pc.Succeeded)
		require.Equal(t, payment.FailureAuthenticationRequired, pc.FailureCode)
	}},
	{"FindCharges_WaitingThenAuthenticated_SaysHowItStands", func(t *testing.T, h Harness) {
		skipUnless(t, h.Cannot.Authenticate)
		req, pc := h.waiting(t)
		found, err := h.Provider.FindCharges(t.Context(), req)
		require.NoError(t, err)
		require.Len(t, found, 1)
		require.Equal(t, pc.Action, found[0].Action, "read while waiting: the same challenge")
		h.Authenticate(t, pc)
		found, err = h.Provider.FindCharges(t.Context(), req)
		require.NoError(t, err)
		require.Len(t, found, 1)
		require.True(t, found[0].Succeeded, "read after the shopper authenticated: %+v", found[0])
		require.Nil(t, found[0].Action)
	}},
	{"CancelCharge_Waiting_IsAbandoned", func(t *testing.T, h Harness) {
		skipUnless(t, h.Cannot.Authenticate)
		req, waiting := h.waiting(t)
		pc, err := h.Provider.CancelCharge(t.Context(), req, waiting.ID)
		require.NoError(t, err)
		require.False(t, pc.Succeeded)
		require.Nil(t, pc.Action)
		require.Equal(t, payment.FailureAuthenticationAbandoned, pc.FailureCode)
		found, err := h.Provider.FindCharges(t.Context(), req)
		require.NoError(t, err)
		require.Len(t, found, 1)
		require.Equal(t, payment.FailureAuthenticationAbandoned, found[0].FailureCode, "cancelled for good")
	}},
	{"CancelCharge_AfterTheShopperAuthenticated_IsThatSuccess", func(t *testing.T, h Harness) {
		skipUnless(t, h.Cannot.Authenticate)
		req, waiting := h.waiting(t)
		h.Authenticate(t, waiting)
		pc, err := h.Provider.CancelCharge(t.Context(), req, waiting.ID)
		require.NoError(t, err)
		require.True(t, pc.Succeeded, "a cancel refused because the payment completed is that payment: %+v", pc)
		if h.Charges != nil {
			require.Equal(t, 1, h.Charges(t, req))
		}
	}},
	{"CreateRefund_WholeCharge_Succeeds", func(t *testing.T, h Harness) {
		skipUnlessRefunds(t, h, "")
		h.refund(t)
	}},
	{"CreateRefund_SameProviderKeyTwice_IsOneRefund", func(t *testing.T, h Harness) {
		skipUnlessRefunds(t, h, h.Cannot.Deduplicate)
		req, first := h.refund(t)
		again, err := h.Provider.CreateRefund(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, first, again, "the same key gets the same refund")
	}},
	{"FindRefund_AfterTheRefund_IsTheSameRefund", func(t *testing.T, h Harness) {
		skipUnlessRefunds(t, h, h.Cannot.FindAfterRefund)
		req, pr := h.refund(t)
		found, err := h.Provider.FindRefund(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, &pr, found)
	}},
	{"FindRefund_BeforeTheRefund_IsNil", func(t *testing.T, h Harness) {
		skipUnlessRefunds(t, h, "")
		req, pc := h.charge(t)
		found, err := h.Provider.FindRefund(t.Context(), RefundRequest(pc.ID, req.Amount, req.Currency))
		require.NoError(t, err)
		require.Nil(t, found, "the provider holds no refund for a request never sent")
	}},
	{"CreateRefund_MoreThanTheCharge_IsAFailedRefundNotAnError", func(t *testing.T, h Harness) {
		skipUnlessRefunds(t, h, h.Cannot.RefuseRefund)
		req, pc := h.charge(t)
		pr, err := h.Provider.CreateRefund(t.Context(), RefundRequest(pc.ID, req.Amount+1, req.Currency))
		require.NoError(t, err, "a refusal is an answer")
		require.Equal(t, payment.RefundFailed, pr.State, "%+v", pr)
		require.NotEmpty(t, pr.FailureCode)
		require.NotEmpty(t, pr.FailureMessage)
	}},
	{"CreateCharge_Decline_IsAFailedChargeNotAnError", func(t *testing.T, h Harness) {
		skipUnless(t, h.Cannot.Decline)
		pc, err := h.Provider.CreateCharge(t.Context(), Request(h.DecliningCard, 1999, "USD"))
		require.NoError(t, err, "a decline is an answer")
		require.False(t, pc.Succeeded)
		require.Equal(t, h.DeclineCode, pc.FailureCode)
		require.NotEmpty(t, pc.FailureMessage)
	}},
}

// PressChallenge presses a button ("complete" or "fail") of the challenge
// page at challengeURL, the page a waiting payment's Action names, as the
// shopper's browser does: a form POST, whose answer must be 303 back to the
// charge's return URL, which it returns. client carries the request (nil:
// http.DefaultClient); its redirects are not followed.
func PressChallenge(t require.TestingT, client *http.Client, challengeURL, button string) *url.URL {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	c := *cmp.Or(client, http.DefaultClient)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.PostForm(challengeURL+"/"+button, nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the page sends the shopper back")
	back, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	return back
}
