package stripe

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
	"chargeonce/provider/stripe/stripefake"
)

// charged charges pm and requires that it succeeded.
func (b *bundle) charged(t *testing.T, pm string, amount int64, currency string) payment.ProviderCharge {
	t.Helper()
	pc, err := b.provider.CreateCharge(context.Background(), request(pm, amount, currency))
	require.NoError(t, err)
	require.True(t, pc.Succeeded, "%+v", pc)
	return pc
}

// refundPosts are the refund requests the fake received.
func (b *bundle) refundPosts() []stripefake.Call {
	var out []stripefake.Call
	for _, c := range b.fake.Calls() {
		if c.Method == http.MethodPost && c.Path == "/v1/refunds" {
			out = append(out, c)
		}
	}
	return out
}

// refundRequest is the request of a fresh refund attempt of pc, as payment
// makes it, with reason.
func refundRequest(pc payment.ProviderCharge, amount int64, currency, reason string) payment.ProviderRefundRequest {
	req := providertest.RefundRequest(pc.ID, amount, currency)
	req.Reason = reason
	return req
}

func TestCreateRefund_Succeeded_RefundsThePaymentIntentUnderOurKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pc := b.charged(t, "pm_card_visa", 1999, "USD")
	for _, tt := range []struct{ reason, stripeReason string }{
		{"requested_by_customer", "requested_by_customer"},
		{"The shopper sent the shoes back", ""}, // Stripe takes three reasons only
	} {
		req := refundRequest(pc, 700, "USD", tt.reason)
		r, err := b.provider.CreateRefund(ctx, req)
		require.NoError(t, err)
		require.Equal(t, payment.RefundSucceeded, r.State)
		require.Regexp(t, `^re_`, r.ID)

		posts := b.refundPosts()
		c := posts[len(posts)-1]
		require.Equal(t, req.IdempotencyKey, c.IdempotencyKey, "our provider key is Stripe's Idempotency-Key")
		require.Equal(t, pc.ID, c.Form.Get("payment_intent"))
		require.Equal(t, "700", c.Form.Get("amount"))
		require.Equal(t, tt.stripeReason, c.Form.Get("reason"))
		require.Equal(t, tt.reason, c.Form.Get("metadata[reason]"), "the merchant's reason, whatever it is")
		for k, v := range req.Metadata {
			require.Equal(t, v, c.Form.Get("metadata["+k+"]"), k)
		}

		found, err := b.provider.FindRefund(ctx, req)
		require.NoError(t, err)
		require.Equal(t, &r, found, "the lookup by attempt finds the same refund")
	}
	require.Len(t, b.fake.Refunds(), 2)
}

func TestCreateRefund_SameKeyTwice_IsOneRefund(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := refundRequest(b.charged(t, "pm_card_visa", 1999, "USD"), 1999, "USD", "")
	first, err := b.provider.CreateRefund(context.Background(), req)
	require.NoError(t, err)
	again, err := b.provider.CreateRefund(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.True(t, b.refundPosts()[1].Replayed, "Stripe's saved answer")
	require.Equal(t, 1, b.fake.RefundsUnderKey(req.IdempotencyKey))
}

func TestCreateRefund_LostResponse_ResendWithTheSameKeyGetsTheSavedRefund(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := refundRequest(b.charged(t, "pm_card_visa", 1999, "USD"), 1000, "USD", "")
	b.fake.FailRefunds(stripefake.CutAfterRun, 1)
	_, err := b.provider.CreateRefund(context.Background(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "Stripe refunded, the answer was lost")

	r, err := b.provider.CreateRefund(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, payment.RefundSucceeded, r.State)
	refunds := b.fake.RefundsFor(MetadataAttemptID, req.AttemptID.String())
	require.Len(t, refunds, 1, "one refund")
	require.Equal(t, refunds[0].ID, r.ID)
	require.Equal(t, 1, b.fake.RefundsUnderKey(req.IdempotencyKey))
}

func TestCreateRefund_NoDefinitiveAnswer_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	eachFaultWithoutAnswer(t, func(t *testing.T, b *bundle, p *Provider, fault stripefake.Fault) {
		req := refundRequest(b.charged(t, "pm_card_visa", 1999, "USD"), 1999, "USD", "")
		b.fake.FailRefunds(fault, 1)
		_, err := p.CreateRefund(context.Background(), req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		require.NotErrorIs(t, err, payment.ErrProviderKeySpent)
		require.Len(t, b.refundPosts(), 1, "stripe-go does not retry on its own")
	})
	t.Run("network down", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := refundRequest(b.charged(t, "pm_card_visa", 1999, "USD"), 1999, "USD", "")
		b.fake.Close()
		_, err := b.provider.CreateRefund(context.Background(), req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		_, err = b.provider.FindRefund(context.Background(), req)
		require.Error(t, err, "a listing that fails is no proof of none")
	})
}

func TestCreateRefund_Pending_IsReadUntilStripeSettlesIt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status, failureReason string
		want                  payment.ProviderRefund
	}{
		{"succeeded", "", payment.ProviderRefund{State: payment.RefundSucceeded}},
		{"failed", "expired_or_canceled_card", payment.ProviderRefund{State: payment.RefundFailed,
			FailureCode: "expired_or_canceled_card", FailureMessage: "The refund failed: the card is expired or closed. Nothing was refunded."}},
		{"canceled", "", payment.ProviderRefund{State: payment.RefundFailed,
			FailureCode: "canceled", FailureMessage: "The refund was cancelled at the card provider. Nothing was refunded."}},
	} {
		t.Run(tt.status, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			req := refundRequest(b.charged(t, stripefake.RefundPendingCard, 1999, "USD"), 1999, "USD", "")
			r, err := b.provider.CreateRefund(ctx, req)
			require.NoError(t, err)
			require.Equal(t, payment.ProviderRefund{ID: r.ID, State: payment.RefundPending}, r)
			found, err := b.provider.FindRefund(ctx, req)
			require.NoError(t, err)
			require.Equal(t, &r, found, "still pending")

			require.NoError(t, b.fake.SettleRefund(r.ID, tt.status, tt.failureReason))
			found, err = b.provider.FindRefund(ctx, req)
			require.NoError(t, err)
			tt.want.ID = r.ID
			require.Equal(t, &tt.want, found)
			again, err := b.provider.CreateRefund(ctx, req)
			require.NoError(t, err)
			require.Equal(t, tt.want, again, "a replay is read as the refund is now")
			require.Equal(t, 1, b.fake.RefundsUnderKey(req.IdempotencyKey))
		})
	}
}

func TestCreateRefund_MoreThanIsLeft_FailsWithStripesCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pc := b.charged(t, "pm_card_visa", 1999, "USD")
	for _, tt := range []struct {
		amount int64
		code   string // "": refunded
	}{
		{1500, ""},
		{600, "amount_too_large"}, // 499 left
		{499, ""},
		{1, "charge_already_refunded"},
	} {
		req := refundRequest(pc, tt.amount, "USD", "")
		r, err := b.provider.CreateRefund(ctx, req)
		require.NoError(t, err, "a refusal is an answer")
		if tt.code == "" {
			require.Equal(t, payment.RefundSucceeded, r.State, tt.amount)
			continue
		}
		require.Equal(t, payment.RefundFailed, r.State, tt.amount)
		require.Equal(t, tt.code, r.FailureCode)
		require.Contains(t, r.FailureMessage, "Nothing was refunded.")
		found, err := b.provider.FindRefund(ctx, req)
		require.NoError(t, err)
		require.Nil(t, found, "a refused refund is none")
	}
	require.Len(t, b.fake.Refunds(), 2)
	require.Contains(t, b.logs.String(), "Stripe refused the refund request")
}

func TestCreateRefund_AmountStripeCannotTake_FailsBeforeSending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r, err := b.provider.CreateRefund(ctx, refundRequest(b.charged(t, "pm_card_visa", 20000, "MGA"), 19950, "MGA", ""))
	require.NoError(t, err)
	require.Equal(t, payment.RefundFailed, r.State)
	require.Equal(t, CodeAmountNotSupported, r.FailureCode)
	require.Empty(t, b.refundPosts(), "never rounded")

	r, err = b.provider.CreateRefund(ctx, refundRequest(b.charged(t, "pm_card_visa", 500, "ISK"), 200, "ISK", ""))
	require.NoError(t, err)
	require.Equal(t, payment.RefundSucceeded, r.State)
	require.Equal(t, "20000", b.refundPosts()[0].Form.Get("amount"), "in Stripe's unit, as the charge was")
}

func TestCreateRefund_IdempotencyError_IsAnErrorNotAFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := refundRequest(b.charged(t, "pm_card_visa", 1999, "USD"), 500, "USD", "")
	first, err := b.provider.CreateRefund(context.Background(), req)
	require.NoError(t, err)

	changed := req
	changed.Amount = 600 // a bug, or a deploy that changed the request
	_, err = b.provider.CreateRefund(context.Background(), changed)
	require.Error(t, err, "not a failure: the first send refunded")
	require.NotErrorIs(t, err, payment.ErrProviderKeySpent)
	require.Contains(t, b.logs.String(), "level=ERROR")
	require.Contains(t, b.logs.String(), "first sent with other parameters")
	found, err := b.provider.FindRefund(context.Background(), changed)
	require.NoError(t, err)
	require.Equal(t, &first, found, "the first send's refund decides")
	require.Len(t, b.fake.Refunds(), 1)
}

func TestCreateRefund_Replayed500_SpendsTheKeyOnlyWhenStripeHoldsNothing(t *testing.T) {
	t.Parallel()
	t.Run("nothing held: key spent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := refundRequest(b.charged(t, "pm_card_visa", 1999, "USD"), 1999, "USD", "")
		b.fake.FailRefunds(stripefake.Error500, 1)
		_, err := b.provider.CreateRefund(context.Background(), req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "a first 500 may still be anything")
		_, err = b.provider.CreateRefund(context.Background(), req)
		require.ErrorIs(t, err, payment.ErrProviderKeySpent, "the replayed 500, and no refund for the attempt")
		require.NotErrorIs(t, err, payment.ErrOutcomeUnknown)
		require.Empty(t, b.fake.Refunds())
	})
	t.Run("a refund was made: it is the answer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := refundRequest(b.charged(t, "pm_card_visa", 1999, "USD"), 1999, "USD", "")
		b.fake.FailRefunds(stripefake.Error500AfterCreate, 1)
		_, err := b.provider.CreateRefund(context.Background(), req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		r, err := b.provider.CreateRefund(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, payment.RefundSucceeded, r.State)
		require.Equal(t, b.fake.Refunds()[0].ID, r.ID)
	})
}

func TestFindRefund_FindsTheAttemptsRefundByMetadata_NeverSends(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pc := b.charged(t, "pm_card_visa", 20000, "USD")
	target := refundRequest(pc, 700, "USD", "")
	none, err := b.provider.FindRefund(ctx, target)
	require.NoError(t, err)
	require.Nil(t, none, "nothing refunded yet")

	r, err := b.provider.CreateRefund(ctx, target)
	require.NoError(t, err)
	// Newer refunds of other attempts: the target is on the second page.
	for range lookupPageSize + 5 {
		_, err := b.provider.CreateRefund(ctx, refundRequest(pc, 1, "USD", ""))
		require.NoError(t, err)
	}
	b.fake.ForgetKeys() // a day later
	posts := len(b.refundPosts())
	found, err := b.provider.FindRefund(ctx, target)
	require.NoError(t, err)
	require.Equal(t, &r, found, "found by the attempt id, whatever became of the key")
	none, err = b.provider.FindRefund(ctx, refundRequest(pc, 700, "USD", ""))
	require.NoError(t, err)
	require.Nil(t, none, "an attempt Stripe never saw: nil, after listing every page")
	require.Len(t, b.refundPosts(), posts, "a lookup never sends a refund")

	// Why: the key forgotten, a send would refund again.
	_, err = b.provider.CreateRefund(ctx, target)
	require.NoError(t, err)
	require.Len(t, b.fake.RefundsFor(MetadataAttemptID, target.AttemptID.String()), 2)
}

func TestRefundOutcome_MapsStripesStatuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tt := range []struct {
		status stripego.RefundStatus
		reason stripego.RefundFailureReason
		state  payment.RefundState
		code   string
	}{
		{stripego.RefundStatusPending, "", payment.RefundPending, ""},
		{stripego.RefundStatusRequiresAction, "", payment.RefundPending, ""},
		{stripego.RefundStatusSucceeded, "", payment.RefundSucceeded, ""},
		{stripego.RefundStatusFailed, stripego.RefundFailureReasonLostOrStolenCard, payment.RefundFailed, "lost_or_stolen_card"},
		{stripego.RefundStatusFailed, "", payment.RefundFailed, CodeRefundFailed},
		{stripego.RefundStatusCanceled, "", payment.RefundFailed, CodeRefundCanceled},
	} {
		r, err := b.provider.refundOutcome(context.Background(), payment.ProviderRefundRequest{},
			&stripego.Refund{ID: "re_1", Status: tt.status, FailureReason: tt.reason})
		require.NoError(t, err, tt.status)
		require.Equal(t, tt.state, r.State, tt.status)
		require.Equal(t, tt.code, r.FailureCode, tt.status)
		require.Equal(t, tt.code != "", r.FailureMessage != "", tt.status)
	}
	_, err := b.provider.refundOutcome(context.Background(), payment.ProviderRefundRequest{}, &stripego.Refund{ID: "re_1", Status: "reversed"})
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "a status this code does not know is never a guess")
}
