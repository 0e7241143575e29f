package apitest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

const RefundMutation = `mutation Refund($key: String!, $input: RefundInput!) {
	refundCharge(idempotencyKey: $key, input: $input) {
		idempotencyKey status replayed retryAfterMs expiresAt
		refund { id chargeId amount currency reason providerRefundId status createdAt } failure { code message } } }`

type RefundPayload struct {
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

type RefundResponse struct {
	Data struct {
		RefundCharge *RefundPayload `json:"refundCharge"`
		RefundStatus *RefundPayload `json:"refundStatus"`
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

// ProviderRefunds are the refunds the simulated provider holds for its
// charge: the ground truth of how often money went back.
func (s *Server) ProviderRefunds(t *testing.T, providerChargeID string) []map[string]any {
	t.Helper()
	r := s.Send(t, http.MethodGet, "/provider/v1/refunds?"+url.Values{"charge": {providerChargeID}}.Encode(), nil, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var list struct {
		Data []map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &list))
	return list.Data
}
