package apitest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/app"
)

const refundStatusQuery = `query RefundStatus($key: String!) { refundStatus(idempotencyKey: $key) { status replayed refund { id amount } } }`

const chargeRefundsQuery = `query Charge($key: String!) { chargeStatus(idempotencyKey: $key) {
	charge { id amountRefunded refunds { id amount status } } } }`

func TestRefundCharge_OverHTTP_RefundsOnceAndRefusesClearly(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, nil)
	chargeKey := NewKey()
	var charged Response
	s.Post(t, app.DemoAPIKeyDefault, nil, ChargeCardMutation, map[string]any{"key": chargeKey, "input": Visa(100)}, &charged)
	require.Empty(t, charged.Errors)
	chargeID := charged.Data.ChargeCard.Charge.Id

	refund := func(apiKey, key string, input map[string]any) (RefundResponse, RawResponse) {
		var r RefundResponse
		raw := s.Post(t, apiKey, nil, RefundMutation, map[string]any{"key": key, "input": input}, &r)
		return r, raw
	}
	key := NewKey()
	first, _ := refund(app.DemoAPIKeyDefault, key, map[string]any{"chargeId": chargeID, "amount": 30, "reason": "damaged"})
	require.Empty(t, first.Errors)
	got := first.Data.RefundCharge
	require.Equal(t, "SUCCEEDED", got.Status)
	require.False(t, got.Replayed)
	require.Equal(t, 30, got.Refund.Amount)
	require.Equal(t, "USD", got.Refund.Currency)
	require.Equal(t, chargeID, got.Refund.ChargeID)
	require.Equal(t, "SUCCEEDED", got.Refund.Status)
	require.NotNil(t, got.Refund.ProviderRefundID)

	again, _ := refund(app.DemoAPIKeyDefault, key, map[string]any{"chargeId": chargeID, "amount": 30, "reason": "damaged"})
	require.Empty(t, again.Errors)
	require.True(t, again.Data.RefundCharge.Replayed)
	require.Equal(t, got.Refund.ID, again.Data.RefundCharge.Refund.ID)

	reused, _ := refund(app.DemoAPIKeyDefault, key, map[string]any{"chargeId": chargeID, "amount": 31})
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", OnlyCode(t, reused.Errors))

	tooMuch, _ := refund(app.DemoAPIKeyDefault, NewKey(), map[string]any{"chargeId": chargeID, "amount": 71})
	require.Equal(t, "REFUND_EXCEEDS_CHARGE", OnlyCode(t, tooMuch.Errors))
	require.EqualValues(t, 70, tooMuch.Errors[0].Extensions["refundable"], "the answer says what remains")
	require.Equal(t, "input.amount", tooMuch.Errors[0].Extensions["field"])

	unknown, _ := refund(app.DemoAPIKeyDefault, NewKey(), map[string]any{"chargeId": NewKey(), "amount": 1})
	require.Equal(t, "CHARGE_NOT_FOUND", OnlyCode(t, unknown.Errors))
	notAnID, _ := refund(app.DemoAPIKeyDefault, NewKey(), map[string]any{"chargeId": "ch_1", "amount": 1})
	require.Equal(t, "BAD_USER_INPUT", OnlyCode(t, notAnID.Errors))
	zero, _ := refund(app.DemoAPIKeyDefault, NewKey(), map[string]any{"chargeId": chargeID, "amount": 0})
	require.Equal(t, "BAD_USER_INPUT", OnlyCode(t, zero.Errors))

	forbidden, raw := refund(PublishableKey, NewKey(), map[string]any{"chargeId": chargeID, "amount": 1})
	require.Equal(t, "FORBIDDEN", OnlyCode(t, forbidden.Errors), "a publishable key never refunds")
	require.Equal(t, http.StatusForbidden, raw.Status)

	var status RefundResponse
	s.Post(t, app.DemoAPIKeyDefault, nil, refundStatusQuery, map[string]any{"key": key}, &status)
	require.Empty(t, status.Errors)
	require.Equal(t, got.Refund.ID, status.Data.RefundStatus.Refund.ID)

	var charge RefundResponse
	s.Post(t, app.DemoAPIKeyDefault, nil, chargeRefundsQuery, map[string]any{"key": chargeKey}, &charge)
	require.Empty(t, charge.Errors)
	require.Equal(t, 30, charge.Data.ChargeStatus.Charge.AmountRefunded)
	require.Len(t, charge.Data.ChargeStatus.Charge.Refunds, 1)
	require.Equal(t, got.Refund.ID, charge.Data.ChargeStatus.Charge.Refunds[0].ID)

	refunds, err := s.API("").ListProviderRefunds(t.Context(), apiclient.ProviderRefundFilter{})
	require.NoError(t, err)
	require.Len(t, refunds, 1, "one refund reached the provider")
	require.Equal(t, 2, CountRows(t, pool, "SELECT count(*)::int FROM charge_attempts"), "the charge and the one refund were claimed")
}
