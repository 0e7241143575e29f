package app

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

const refundMutation = `mutation Refund($key: String!, $input: RefundInput!) {
	refundCharge(idempotencyKey: $key, input: $input) {
		idempotencyKey status replayed retryAfterMs expiresAt
		refund { id chargeId amount currency reason providerRefundId status createdAt } failure { code message } } }`

const refundStatusQuery = `query RefundStatus($key: String!) { refundStatus(idempotencyKey: $key) { status replayed refund { id amount } } }`

const chargeRefundsQuery = `query Charge($key: String!) { chargeStatus(idempotencyKey: $key) {
	charge { id amountRefunded refunds { id amount status } } } }`

type refundPayload struct {
	IdempotencyKey string `json:"idempotencyKey"`
	Status         string `json:"status"`
	Replayed       bool   `json:"replayed"`
	Refund         *struct {
		ID               string  `json:"id"`
		ChargeID         string  `json:"chargeId"`
		Amount           int     `json:"amount"`
		Currency         string  `json:"currency"`
		Reason           *string `json:"reason"`
		ProviderRefundID *string `json:"providerRefundId"`
		Status           string  `json:"status"`
	} `json:"refund"`
}

type refundResponse struct {
	Data struct {
		RefundCharge *refundPayload `json:"refundCharge"`
		RefundStatus *refundPayload `json:"refundStatus"`
		ChargeStatus *struct {
			Charge struct {
				ID             string `json:"id"`
				AmountRefunded int    `json:"amountRefunded"`
				Refunds        []struct {
					ID     string `json:"id"`
					Amount int    `json:"amount"`
					Status string `json:"status"`
				} `json:"refunds"`
			} `json:"charge"`
		} `json:"chargeStatus"`
	} `json:"data"`
	Errors gqlerror.List `json:"errors"`
}

func TestRefundCharge_OverHTTP_RefundsOnceAndRefusesClearly(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := startServer(t, dbURL, nil)
	chargeKey := newKey()
	var charged gqlResponse
	s.post(t, DemoAPIKeyDefault, nil, chargeCardMutation, map[string]any{"key": chargeKey, "input": visa(100)}, &charged)
	require.Empty(t, charged.Errors)
	chargeID := charged.Data.ChargeCard.Charge.Id

	refund := func(apiKey, key string, input map[string]any) (refundResponse, rawResponse) {
		var r refundResponse
		raw := s.post(t, apiKey, nil, refundMutation, map[string]any{"key": key, "input": input}, &r)
		return r, raw
	}
	key := newKey()
	first, _ := refund(DemoAPIKeyDefault, key, map[string]any{"chargeId": chargeID, "amount": 30, "reason": "damaged"})
	require.Empty(t, first.Errors)
	got := first.Data.RefundCharge
	require.Equal(t, "SUCCEEDED", got.Status)
	require.False(t, got.Replayed)
	require.Equal(t, 30, got.Refund.Amount)
	require.Equal(t, "USD", got.Refund.Currency)
	require.Equal(t, chargeID, got.Refund.ChargeID)
	require.Equal(t, "SUCCEEDED", got.Refund.Status)
	require.NotNil(t, got.Refund.ProviderRefundID)

	again, _ := refund(DemoAPIKeyDefault, key, map[string]any{"chargeId": chargeID, "amount": 30, "reason": "damaged"})
	require.Empty(t, again.Errors)
	require.True(t, again.Data.RefundCharge.Replayed)
	require.Equal(t, got.Refund.ID, again.Data.RefundCharge.Refund.ID)

	reused, _ := refund(DemoAPIKeyDefault, key, map[string]any{"chargeId": chargeID, "amount": 31})
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", onlyCode(t, reused.Errors))

	tooMuch, _ := refund(DemoAPIKeyDefault, newKey(), map[string]any{"chargeId": chargeID, "amount": 71})
	require.Equal(t, "REFUND_EXCEEDS_CHARGE", onlyCode(t, tooMuch.Errors))
	require.EqualValues(t, 70, tooMuch.Errors[0].Extensions["refundable"], "the answer says what remains")
	require.Equal(t, "input.amount", tooMuch.Errors[0].Extensions["field"])

	unknown, _ := refund(DemoAPIKeyDefault, newKey(), map[string]any{"chargeId": newKey(), "amount": 1})
	require.Equal(t, "CHARGE_NOT_FOUND", onlyCode(t, unknown.Errors))
	notAnID, _ := refund(DemoAPIKeyDefault, newKey(), map[string]any{"chargeId": "ch_1", "amount": 1})
	require.Equal(t, "BAD_USER_INPUT", onlyCode(t, notAnID.Errors))
	zero, _ := refund(DemoAPIKeyDefault, newKey(), map[string]any{"chargeId": chargeID, "amount": 0})
	require.Equal(t, "BAD_USER_INPUT", onlyCode(t, zero.Errors))

	forbidden, raw := refund(publishableKey, newKey(), map[string]any{"chargeId": chargeID, "amount": 1})
	require.Equal(t, "FORBIDDEN", onlyCode(t, forbidden.Errors), "a publishable key never refunds")
	require.Equal(t, http.StatusForbidden, raw.status)

	var status refundResponse
	s.post(t, DemoAPIKeyDefault, nil, refundStatusQuery, map[string]any{"key": key}, &status)
	require.Empty(t, status.Errors)
	require.Equal(t, got.Refund.ID, status.Data.RefundStatus.Refund.ID)

	var charge refundResponse
	s.post(t, DemoAPIKeyDefault, nil, chargeRefundsQuery, map[string]any{"key": chargeKey}, &charge)
	require.Empty(t, charge.Errors)
	require.Equal(t, 30, charge.Data.ChargeStatus.Charge.AmountRefunded)
	require.Len(t, charge.Data.ChargeStatus.Charge.Refunds, 1)
	require.Equal(t, got.Refund.ID, charge.Data.ChargeStatus.Charge.Refunds[0].ID)

	refunds, err := s.api("").ListProviderRefunds(t.Context(), apiclient.ProviderRefundFilter{})
	require.NoError(t, err)
	require.Len(t, refunds, 1, "one refund reached the provider")
	require.Equal(t, 2, countRows(t, pool, "SELECT count(*)::int FROM charge_attempts"), "the charge and the one refund were claimed")
}
