package stripe_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/internal/apiclient"
	"chargeonce/provider/stripe/stripefake"
)

// Authorizations, captures and voids through Stripe over the real server,
// against the project's fake Stripe: captures in parts, a lost capture
// answer, an account without multicapture, a void, and an authorization
// that lapses at Stripe, recorded when its webhook arrives.

// authorized authorizes amount through the fake Stripe and returns the
// charge's id, its key and its PaymentIntent.
func (a stripeAuth) authorized(t *testing.T, amount int) (chargeID, key string, pi stripefake.Intent) {
	t.Helper()
	chargeID, key = a.s.Authorize(t, apitest.Manual(amount))
	intents := a.fake.ClientIntents(key)
	require.Len(t, intents, 1)
	require.Equal(t, "requires_capture", intents[0].Status, "authorized, not captured")
	return chargeID, key, intents[0]
}

func TestStripe_Capture_InPartsThenFinal_EachOnceAtStripe_ThenRefunded(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	api := a.s.API(apiclient.DemoAPIKey)
	ctx := context.Background()
	chargeID, chargeKey, pi := a.authorized(t, 1000)
	c, err := api.ChargeCaptures(ctx, chargeKey)
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusUncaptured, c.CaptureStatus)
	require.Equal(t, 1000, c.AmountCapturable)
	require.NotNil(t, c.AuthorizationExpiresAt)
	require.True(t, pi.CaptureBefore.Equal(*c.AuthorizationExpiresAt), "Stripe's capture_before: %v, recorded: %v", pi.CaptureBefore, *c.AuthorizationExpiresAt)

	key := apitest.NewKey()
	part := a.s.Capture(t, key, apitest.CaptureInput(chargeID, 300, false))
	require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, part.Status)
	require.Equal(t, apiclient.CaptureStatusPartiallyCaptured, part.Charge.CaptureStatus)
	require.Equal(t, 700, part.Charge.AmountCapturable)
	require.True(t, a.s.Capture(t, key, apitest.CaptureInput(chargeID, 300, false)).Replayed)
	final := a.s.Capture(t, apitest.NewKey(), apitest.CaptureInput(chargeID, 500, true))
	require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, final.Status)
	require.Equal(t, apiclient.CaptureStatusCaptured, final.Charge.CaptureStatus)
	require.Equal(t, 800, final.Charge.AmountCaptured)

	captures := a.fake.Captures(pi.ID)
	require.Len(t, captures, 2, "one capture at Stripe per capture attempt, the replay none")
	require.Equal(t, stripefake.Capture{Amount: 300, IdempotencyKey: captures[0].IdempotencyKey}, captures[0])
	require.Equal(t, stripefake.Capture{Amount: 500, Final: true, IdempotencyKey: captures[1].IdempotencyKey}, captures[1])
	for _, c := range captures {
		require.True(t, strings.HasPrefix(c.IdempotencyKey, "chargeonce_"), "the capture attempt's provider key: %s", c.IdempotencyKey)
	}
	now := a.fake.IntentsFor("chargeonce_attempt_id", pi.Metadata["chargeonce_attempt_id"])
	require.Len(t, now, 1, "the captures' marks leave the PaymentIntent the charge's")
	require.Equal(t, "succeeded", now[0].Status)
	require.Equal(t, int64(800), now[0].AmountReceived, "the final capture released the other 200")

	refund, err := api.RefundCharge(ctx, apitest.NewKey(), apiclient.RefundInput{ChargeId: chargeID})
	require.NoError(t, err)
	require.Equal(t, apiclient.Succeeded, refund.Status)
	require.Equal(t, 800, refund.Refund.Amount, "what was captured")
	require.Equal(t, int64(800), a.fake.Refunds()[0].Amount)
}

func TestStripe_Capture_LostAnswer_TheRetryReadsItBack_OneCaptureAtStripe(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	api := a.s.API(apiclient.DemoAPIKey)
	ctx := context.Background()
	chargeID, _, pi := a.authorized(t, 1000)
	// Stripe captures and the answer is lost; then Stripe cannot be read
	// until the test says, so that the inline retries cannot tell either.
	var cut, unreadable atomic.Bool
	unreadable.Store(true)
	a.fake.Script(func(c stripefake.Call) stripefake.Fault {
		switch {
		case strings.HasSuffix(c.Path, "/capture") && !cut.Load():
			cut.Store(true)
			return stripefake.CutAfterRun
		case cut.Load() && unreadable.Load():
			return stripefake.Unavailable
		}
		return stripefake.None
	})
	key := apitest.NewKey()
	first := a.s.Capture(t, key, apitest.CaptureInput(chargeID, 700, false))
	require.Equal(t, apiclient.CaptureAttemptStatusProcessing, first.Status, "Stripe captured, its answer was lost")
	unreadable.Store(false)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := api.CaptureCharge(ctx, key, apitest.CaptureInput(chargeID, 700, false))
		require.NoError(c, err)
		require.Equal(c, apiclient.CaptureAttemptStatusSucceeded, res.Status)
		require.Equal(c, 300, res.Charge.AmountCapturable)
	}, 15*time.Second, 100*time.Millisecond)
	require.Len(t, a.fake.Captures(pi.ID), 1, "read back by its mark, never captured again")
	captureSends := 0
	for _, c := range a.fake.Calls() {
		if strings.HasSuffix(c.Path, "/capture") {
			captureSends++
		}
	}
	require.Equal(t, 1, captureSends)
}

func TestStripe_Capture_WithoutMulticapture_APartIsRefused_AndTheAmountComesBack(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	a.fake.SetMulticapture(false)
	chargeID, _, pi := a.authorized(t, 1000)
	part := a.s.Capture(t, apitest.NewKey(), apitest.CaptureInput(chargeID, 300, false))
	require.Equal(t, apiclient.CaptureAttemptStatusFailed, part.Status)
	require.Equal(t, "charge_not_capturable", part.Failure.Code)
	require.Contains(t, part.Failure.Message, "multicapture is not available")
	require.Equal(t, 1000, part.Charge.AmountCapturable, "the refused part gives its amount back")
	require.Empty(t, a.fake.Captures(pi.ID), "never sent: Stripe would release the rest")

	final := a.s.Capture(t, apitest.NewKey(), apitest.CaptureInput(chargeID, 300, true))
	require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, final.Status)
	require.Equal(t, apiclient.CaptureStatusCaptured, final.Charge.CaptureStatus)
}

func TestStripe_Void_CancelsThePaymentIntent_AndACaptureIsRefused(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	api := a.s.API(apiclient.DemoAPIKey)
	chargeID, _, pi := a.authorized(t, 1000)
	v := a.s.Void(t, apitest.NewKey(), chargeID)
	require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, v.Status)
	require.Equal(t, apiclient.CaptureStatusVoided, v.Charge.CaptureStatus)
	now := a.fake.Intents()[0]
	require.Equal(t, pi.ID, now.ID)
	require.Equal(t, "canceled", now.Status)
	require.Equal(t, "requested_by_customer", now.CancellationReason)
	_, err := api.CaptureCharge(context.Background(), apitest.NewKey(), apitest.CaptureInput(chargeID, 100, true))
	require.Equal(t, "CHARGE_VOIDED", apitest.Refused(err))
}

func TestStripe_Authorization_LapsedAtStripe_TheWebhookRecordsItExpired(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	api := a.s.API(apiclient.DemoAPIKey)
	ctx := context.Background()
	chargeID, chargeKey, pi := a.authorized(t, 1000)
	// An event that changes nothing is only a read.
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.amount_capturable_updated", pi.ID), testStripeWebhookSecret))
	c, err := api.ChargeCaptures(ctx, chargeKey)
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusUncaptured, c.CaptureStatus)

	require.NoError(t, a.fake.ExpireAuthorization(pi.ID))
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("payment_intent.canceled", pi.ID), testStripeWebhookSecret))
	c, err = api.ChargeCaptures(ctx, chargeKey)
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusExpired, c.CaptureStatus, "recorded when the event was read, long before the record's own expiry")
	_, err = api.CaptureCharge(ctx, apitest.NewKey(), apitest.CaptureInput(chargeID, 100, true))
	require.Equal(t, "AUTHORIZATION_EXPIRED", apitest.Refused(err))
}
