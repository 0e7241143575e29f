package stripe

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
	"chargeonce/provider/stripe/stripefake"
)

// authRequest is the request of a fresh attempt with a return URL, as
// payment makes it for a checkout that can send the shopper to their bank.
func authRequest(pm string) payment.ProviderChargeRequest {
	req := request(pm, 1999, "EUR")
	req.ReturnURL = "https://shop.example/return?" + payment.ReturnKeyParam + "=" + req.Metadata["client_idempotency_key"]
	return req
}

// waiting creates the attempt of req, which must wait for the shopper, and
// returns its PaymentIntent's id.
func (b *bundle) waiting(t *testing.T, req payment.ProviderChargeRequest) string {
	t.Helper()
	pc, err := b.provider.CreateCharge(context.Background(), req)
	require.NoError(t, err)
	require.NotNil(t, pc.Action, "waits for the shopper: %+v", pc)
	return pc.ID
}

// callsTo are the requests the fake received whose path ends with suffix.
func (b *bundle) callsTo(suffix string) []stripefake.Call {
	var out []stripefake.Call
	for _, c := range b.fake.Calls() {
		if strings.HasSuffix(c.Path, suffix) {
			out = append(out, c)
		}
	}
	return out
}

func TestCreateCharge_RequiresAction_WithReturnURL_WaitsAtTheRedirect(t *testing.T) {
	t.Parallel()
	for _, pm := range []string{"pm_card_authenticationRequired", "pm_card_threeDSecure2Required"} {
		b := setup(t)
		req := authRequest(pm)
		pc, err := b.provider.CreateCharge(context.Background(), req)
		require.NoError(t, err, pm)
		require.False(t, pc.Succeeded)
		require.Empty(t, pc.FailureCode, "a wait, not an outcome")
		require.NotNil(t, pc.Action)
		intents := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())
		require.Len(t, intents, 1)
		require.Equal(t, intents[0].ID, pc.ID)
		require.Equal(t, "requires_action", intents[0].Status, "left waiting, not cancelled")
		require.Equal(t, intents[0].NextActionURL, pc.Action.URL, "the shopper goes to next_action.redirect_to_url.url")
		require.True(t, strings.HasPrefix(pc.Action.URL, b.fake.URL+"/redirect/authenticate/"), pc.Action.URL)

		creates := b.creates()
		require.Len(t, creates, 1)
		require.Equal(t, req.ReturnURL, creates[0].Form.Get("return_url"), "the return URL, with the client's key in it")
		require.Empty(t, creates[0].Form.Get("use_stripe_sdk"), "a redirect, not Stripe.js")
		require.Empty(t, b.callsTo("/cancel"), "nothing cancelled")

		// A send again of the key (nobody sends a waiting attempt again, but
		// the answer to a lost first send is one) is Stripe's saved answer,
		// read as it is now; the lookup reads the same wait.
		again, err := b.provider.CreateCharge(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, pc, again)
		require.True(t, b.creates()[1].Replayed)
		require.Equal(t, b.creates()[0].Form, b.creates()[1].Form, "the same parameters on every send")
		found, err := b.provider.FindCharges(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, []payment.ProviderCharge{pc}, found)
	}
}

func TestFindCharges_AuthenticationCompleted_IsSucceeded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := authRequest("pm_card_authenticationRequired")
	id := b.waiting(t, req)
	require.NoError(t, b.fake.CompleteAuthentication(id))

	found, err := b.provider.FindCharges(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []payment.ProviderCharge{{ID: id, Succeeded: true}}, found)
	require.Len(t, b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String()), 1, "one PaymentIntent")
}

func TestFindCharges_AuthenticationFailed_IsAuthenticationFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := authRequest("pm_card_authenticationRequired")
	id := b.waiting(t, req)

	// The shopper fails the challenge on the page, which sends them back.
	page := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())[0].NextActionURL
	back := providertest.PressChallenge(t, nil, page, "fail")
	require.Equal(t, "shop.example", back.Host)
	require.Equal(t, req.Metadata["client_idempotency_key"], back.Query().Get(payment.ReturnKeyParam), "back to the return URL, as it was")

	charges, err := b.provider.FindCharges(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, charges, 1)
	found := charges[0]
	require.Equal(t, id, found.ID)
	require.False(t, found.Succeeded)
	require.Nil(t, found.Action)
	require.Equal(t, payment.FailureAuthenticationFailed, found.FailureCode)
	require.Equal(t, "The card's authentication (3-D Secure) failed. The card was not charged.", found.FailureMessage)
	require.Empty(t, b.callsTo("/confirm"), "never confirmed again")
}

func TestCancelCharge_Waiting_CancelsAsAbandoned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := authRequest("pm_card_authenticationRequired")
	id := b.waiting(t, req)

	pc, err := b.provider.CancelCharge(context.Background(), req, id)
	require.NoError(t, err)
	require.Equal(t, id, pc.ID)
	require.False(t, pc.Succeeded)
	require.Equal(t, payment.FailureAuthenticationAbandoned, pc.FailureCode)
	require.Contains(t, pc.FailureMessage, "not completed in time")
	pi := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())[0]
	require.Equal(t, "canceled", pi.Status)
	require.Equal(t, "abandoned", pi.CancellationReason)
	cancels := b.callsTo("/cancel")
	require.Len(t, cancels, 1)
	require.Equal(t, req.IdempotencyKey+"_cancel", cancels[0].IdempotencyKey, "a key derived from ours")
	require.Equal(t, "abandoned", cancels[0].Form.Get("cancellation_reason"))

	// Asked again (a crash between the cancel and the record), or looked up:
	// the same outcome, and no second cancel.
	again, err := b.provider.CancelCharge(context.Background(), req, id)
	require.NoError(t, err)
	require.Equal(t, pc, again)
	found, err := b.provider.FindCharges(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []payment.ProviderCharge{pc}, found)
	require.Len(t, b.callsTo("/cancel"), 1)
}

func TestCancelCharge_ShopperCompletedFirst_RefusedAndSucceeded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := authRequest("pm_card_threeDSecure2Required")
	id := b.waiting(t, req)
	// The shopper comes back from the bank just before the cancel runs.
	b.fake.Script(func(c stripefake.Call) stripefake.Fault {
		if strings.HasSuffix(c.Path, "/cancel") {
			return stripefake.CompletesFirst
		}
		return stripefake.None
	})

	pc, err := b.provider.CancelCharge(context.Background(), req, id)
	require.NoError(t, err)
	require.Equal(t, payment.ProviderCharge{ID: id, Succeeded: true}, pc, "the payment the shopper completed")
	cancels := b.callsTo("/cancel")
	require.Len(t, cancels, 1)
	require.Equal(t, http.StatusBadRequest, cancels[0].Status, "Stripe refuses to cancel a succeeded PaymentIntent")
	require.Equal(t, "succeeded", b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())[0].Status)
}

func TestCancelCharge_EndedBeforeTheCancel_IsReadAsItEnded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	completed, failed := authRequest("pm_card_authenticationRequired"), authRequest("pm_card_authenticationRequired")
	completedID, failedID := b.waiting(t, completed), b.waiting(t, failed)
	require.NoError(t, b.fake.CompleteAuthentication(completedID))
	require.NoError(t, b.fake.FailAuthentication(failedID))

	pc, err := b.provider.CancelCharge(context.Background(), completed, completedID)
	require.NoError(t, err)
	require.True(t, pc.Succeeded)
	pc, err = b.provider.CancelCharge(context.Background(), failed, failedID)
	require.NoError(t, err)
	require.Equal(t, payment.FailureAuthenticationFailed, pc.FailureCode)
	require.Empty(t, b.callsTo("/cancel"), "nothing waits: nothing to cancel")
}

func TestCancelCharge_NoDefinitiveAnswer_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := authRequest("pm_card_authenticationRequired")
	id := b.waiting(t, req)
	b.fake.Script(func(c stripefake.Call) stripefake.Fault {
		if strings.HasSuffix(c.Path, "/cancel") {
			return stripefake.Unavailable
		}
		return stripefake.None
	})
	_, err := b.provider.CancelCharge(context.Background(), req, id)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "it still waits: the shopper may yet complete it")

	// Refused for good (404): still waiting, still unknown, logged.
	b.fake.Script(func(c stripefake.Call) stripefake.Fault {
		if strings.HasSuffix(c.Path, "/cancel") {
			return stripefake.NotFound
		}
		return stripefake.None
	})
	_, err = b.provider.CancelCharge(context.Background(), req, id)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "never a failure while the shopper can complete it")
	require.Contains(t, b.logs.String(), "Stripe refused to cancel a PaymentIntent that waits for authentication")

	b.fake.Script(nil)
	pc, err := b.provider.CancelCharge(context.Background(), req, id)
	require.NoError(t, err)
	require.Equal(t, payment.FailureAuthenticationAbandoned, pc.FailureCode)

	_, err = b.provider.CancelCharge(context.Background(), authRequest("pm_card_authenticationRequired"), "pi_nosuchintent")
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "a PaymentIntent Stripe does not know has nothing to cancel")
}

func TestCreateCharge_UnconfirmedWithReturnURL_IsConfirmedWithIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fake.FailCreates(stripefake.Error500AfterCreate, 1) // created, never confirmed, a 500 saved
	req := authRequest("pm_card_authenticationRequired")
	_, err := b.provider.CreateCharge(context.Background(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)

	// The replayed 500: the lookup finds the PaymentIntent and confirms it.
	pc, err := b.provider.CreateCharge(context.Background(), req)
	require.NoError(t, err)
	require.NotNil(t, pc.Action, "the confirm carried the return URL: a redirect")
	confirms := b.callsTo("/confirm")
	require.Len(t, confirms, 1)
	require.Equal(t, req.ReturnURL, confirms[0].Form.Get("return_url"))
}

func TestCreateCharge_RequiresAction_WithoutReturnURL_FailsAuthenticationRequired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := request("pm_card_authenticationRequired", 1999, "EUR")
	pc, err := b.provider.CreateCharge(context.Background(), req)
	require.NoError(t, err)
	require.Nil(t, pc.Action)
	require.Equal(t, payment.FailureAuthenticationRequired, pc.FailureCode)
	require.Empty(t, b.creates()[0].Form.Get("return_url"), "the request of a charge without a return URL is as it always was")
	pi := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())[0]
	require.Equal(t, "canceled", pi.Status)
	require.Equal(t, "abandoned", pi.CancellationReason)
}
