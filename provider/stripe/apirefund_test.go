package stripe_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/provider/stripe/stripefake"
)

// Refunds through Stripe over the real server, against the project's fake
// Stripe: a refund, one that pends until a webhook says it settled, one
// whose answer is lost, and a webhook that arrives before the answer.

// charged charges amount to pm through the fake Stripe and returns the
// charge's id.
func (a stripeAuth) charged(t *testing.T, pm string, amount int) string {
	t.Helper()
	in := apitest.WithPaymentMethod(pm)
	in.Amount = new(amount)
	r := a.s.ChargeCard(t, "demo-key", apitest.NewKey(), in)
	require.Empty(t, r.Errors)
	require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status)
	return r.Data.ChargeCard.Charge.Id
}

func (a stripeAuth) refund(t *testing.T, key, chargeID string, amount int) apitest.RefundResponse {
	t.Helper()
	var r apitest.RefundResponse
	a.s.Post(t, "demo-key", nil, apitest.RefundMutation, map[string]any{"key": key, "input": map[string]any{"chargeId": chargeID, "amount": amount}}, &r)
	require.Empty(t, r.Errors)
	return r
}

func TestStripe_Refund_SucceedsOnceAndReplays(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	chargeID := a.charged(t, "pm_card_visa", 1000)
	key := apitest.NewKey()
	r := a.refund(t, key, chargeID, 400)
	require.Equal(t, "SUCCEEDED", r.Data.RefundCharge.Status)
	require.Equal(t, 400, r.Data.RefundCharge.Refund.Amount)
	again := a.refund(t, key, chargeID, 400)
	require.True(t, again.Data.RefundCharge.Replayed)
	refunds := a.fake.Refunds()
	require.Len(t, refunds, 1)
	require.Equal(t, *r.Data.RefundCharge.Refund.ProviderRefundID, refunds[0].ID)
	require.Equal(t, int64(400), refunds[0].Amount)
	require.NotEmpty(t, refunds[0].Metadata["chargeonce_attempt_id"], "the refund names its attempt")
}

func TestStripe_Refund_PendingUntilTheWebhook_ReadsAndRecordsOnce(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, map[string]string{"REFUND_CHECK_INTERVAL": "1h"}) // only the webhook ends the wait
	chargeID := a.charged(t, stripefake.RefundPendingCard, 1000)
	key := apitest.NewKey()
	r := a.refund(t, key, chargeID, 1000)
	require.Equal(t, "PROCESSING", r.Data.RefundCharge.Status)
	refunds := a.fake.Refunds()
	require.Len(t, refunds, 1)
	require.Equal(t, "pending", refunds[0].Status)

	// An event before the refund settles reads it, finds it pending, and
	// changes nothing.
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("refund.created", refunds[0].ID), testStripeWebhookSecret))
	status, _ := a.stored(t, key)
	require.Equal(t, "PROCESSING", status)

	require.NoError(t, a.fake.SettleRefund(refunds[0].ID, "succeeded", ""))
	event := a.fake.Event("charge.refund.updated", refunds[0].ID)
	for range 2 { // redelivered: the second finds it final
		require.Equal(t, http.StatusOK, a.deliver(t, event, testStripeWebhookSecret))
	}
	a.eventually(t, key, "SUCCEEDED", "")
	require.Equal(t, 1, a.events(t, key, "refund.succeeded"))
	require.Equal(t, 1, apitest.CountRows(t, a.pool, "SELECT count(*)::int FROM refunds"), "one refund recorded")
	require.Len(t, a.fake.Refunds(), 1, "nothing was sent again")
}

func TestStripe_Refund_LostAnswer_TheWebhookBeatsTheRetry_OneRefund(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, map[string]string{"RECONCILE_INTERVAL": "1h"})
	chargeID := a.charged(t, "pm_card_visa", 1000)
	key := apitest.NewKey()
	a.fake.FailRefunds(stripefake.CutAfterRun, 100) // every send of the request, inline retries too
	r := a.refund(t, key, chargeID, 250)
	require.Equal(t, "PROCESSING", r.Data.RefundCharge.Status, "the answer was lost: nobody knows yet")
	refunds := a.fake.Refunds()
	require.Len(t, refunds, 1, "Stripe made the refund once, however often it was sent")

	// The webhook arrives first; the attempt is not pending, so it is the
	// retry (or the reconciler) that records it: the webhook reads nothing
	// and records nothing.
	require.Equal(t, http.StatusOK, a.deliver(t, a.fake.Event("refund.updated", refunds[0].ID), testStripeWebhookSecret))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var retry apitest.RefundResponse
		a.s.Post(t, "demo-key", nil, apitest.RefundMutation, map[string]any{"key": key, "input": map[string]any{"chargeId": chargeID, "amount": 250}}, &retry)
		require.Empty(c, retry.Errors)
		require.Equal(c, "SUCCEEDED", retry.Data.RefundCharge.Status)
		require.Equal(c, refunds[0].ID, *retry.Data.RefundCharge.Refund.ProviderRefundID)
	}, 40*time.Second, 200*time.Millisecond)
	require.Len(t, a.fake.Refunds(), 1, "one refund at Stripe")
	require.Equal(t, 1, apitest.CountRows(t, a.pool, "SELECT count(*)::int FROM refunds"), "one refund recorded")
	require.Equal(t, 1, a.events(t, key, "refund.succeeded"))
}

func TestStripe_Refund_FailsAfterItSucceeded_TheAmountComesBackOnce(t *testing.T) {
	t.Parallel()
	a := stripeAuthServer(t, nil)
	chargeID := a.charged(t, "pm_card_visa", 1000)
	key := apitest.NewKey()
	r := a.refund(t, key, chargeID, 1000)
	require.Equal(t, "SUCCEEDED", r.Data.RefundCharge.Status)
	refunds := a.fake.Refunds()
	require.Len(t, refunds, 1)

	// The card was closed: Stripe fails the refund after it succeeded, and
	// says so (twice, as it may).
	require.NoError(t, a.fake.SettleRefund(refunds[0].ID, "failed", "expired_or_canceled_card"))
	event := a.fake.Event("refund.failed", refunds[0].ID)
	for range 2 {
		require.Equal(t, http.StatusOK, a.deliver(t, event, testStripeWebhookSecret))
	}
	var charge apitest.RefundResponse
	a.s.Post(t, "demo-key", nil, `query($id: String!) { refundStatus(idempotencyKey: $id) { status refund { id status } } }`, map[string]any{"id": key}, &charge)
	require.Empty(t, charge.Errors)
	require.Equal(t, "FAILED", charge.Data.RefundStatus.Refund.Status, "the refund failed later")
	require.Equal(t, 1, a.events(t, key, "refund.failed"), "announced once")
	require.Zero(t, apitest.CountRows(t, a.pool, "SELECT amount_refunded::int FROM charges WHERE id = $1", chargeID))

	again := a.refund(t, apitest.NewKey(), chargeID, 1000)
	require.Equal(t, "SUCCEEDED", again.Data.RefundCharge.Status, "the amount is refundable again")
	require.Len(t, a.fake.Refunds(), 2)
}
