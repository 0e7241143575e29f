package app

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/devfault"
	"chargeonce/provider/stripe/stripefake"
)

// demoShop posts body to one of the demo's shop backend routes and decodes
// its JSON answer.
func (s *Server) demoShop(t *testing.T, path, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	r := s.Send(t, http.MethodPost, path, JSONHeaders(headers...), strings.NewReader(body))
	var v map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &v), "%s", r.Body)
	return r.Status, v
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

// demoRefundBody is the JSON of a request to POST /demo/refund.
func demoRefundBody(t *testing.T, fields map[string]any) string {
	t.Helper()
	b, err := json.Marshal(fields)
	require.NoError(t, err)
	return string(b)
}

// TestDemoShopBackend_RefundsOncePerRefundID: the demo's shop backend
// refunds a charge with the secret key on the server side, once per
// refundId (a retry gets the stored refund, replayed), what remains when no
// amount is named, and refuses clearly: more than remains with what does
// remain, an unknown charge, a malformed request. It does not exist in
// production.
func TestDemoShopBackend_RefundsOncePerRefundID(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := StartOn(t, dbURL, nil)
	charged := s.ChargeCard(t, DemoAPIKeyDefault, NewKey(), Visa(100))
	require.Equal(t, "SUCCEEDED", charged.Data.ChargeCard.Status)
	charge := charged.Data.ChargeCard.Charge
	refund := func(fields map[string]any) (int, map[string]any) {
		return s.demoShop(t, "/demo/refund", demoRefundBody(t, fields))
	}

	status, first := refund(map[string]any{"refundId": "refund-1", "chargeId": charge.Id, "amount": 30})
	require.Equal(t, http.StatusOK, status, "%v", first)
	require.Equal(t, "SUCCEEDED", first["status"])
	require.Equal(t, false, first["replayed"])
	got := first["refund"].(map[string]any)
	require.Equal(t, charge.Id, got["chargeId"])
	require.EqualValues(t, 30, got["amount"])
	require.Equal(t, "USD", got["currency"])
	require.NotEmpty(t, got["providerRefundId"])
	require.NotEmpty(t, got["createdAt"])
	require.NotContains(t, first, "retryAfterMs", "a final answer has no wait")

	status, again := refund(map[string]any{"refundId": "refund-1", "chargeId": charge.Id, "amount": 30})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, again["replayed"])
	require.Equal(t, got["id"], again["refund"].(map[string]any)["id"], "the same refundId, the same refund")
	require.Len(t, s.ProviderRefunds(t, charge.ProviderChargeId), 1, "one refund reached the provider")

	status, tooMuch := refund(map[string]any{"refundId": "refund-2", "chargeId": charge.Id, "amount": 71})
	require.Equal(t, http.StatusConflict, status)
	refusal := tooMuch["error"].(map[string]any)
	require.Equal(t, "REFUND_EXCEEDS_CHARGE", refusal["code"])
	require.EqualValues(t, 70, refusal["refundable"], "the answer says what remains")

	status, rest := refund(map[string]any{"refundId": "refund-3", "chargeId": charge.Id})
	require.Equal(t, http.StatusOK, status, "%v", rest)
	require.EqualValues(t, 70, rest["refund"].(map[string]any)["amount"], "no amount: what remains")
	require.Len(t, s.ProviderRefunds(t, charge.ProviderChargeId), 2)

	for _, tc := range []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"the refundId again, another amount", demoRefundBody(t, map[string]any{"refundId": "refund-1", "chargeId": charge.Id, "amount": 31}), http.StatusConflict, "IDEMPOTENCY_KEY_REUSED"},
		{"an unknown charge", demoRefundBody(t, map[string]any{"refundId": "refund-4", "chargeId": NewKey()}), http.StatusNotFound, "CHARGE_NOT_FOUND"},
		{"no refundId", demoRefundBody(t, map[string]any{"refundId": "", "chargeId": charge.Id}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"a refundId too long", demoRefundBody(t, map[string]any{"refundId": strings.Repeat("r", 101), "chargeId": charge.Id}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"not a charge id", demoRefundBody(t, map[string]any{"refundId": "refund-5", "chargeId": "ch_1"}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"an amount of 0", demoRefundBody(t, map[string]any{"refundId": "refund-6", "chargeId": charge.Id, "amount": 0}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"an unknown field", demoRefundBody(t, map[string]any{"refundId": "refund-7", "chargeId": charge.Id, "key": "x"}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"not JSON", `not json`, http.StatusBadRequest, "BAD_USER_INPUT"},
	} {
		status, v := s.demoShop(t, "/demo/refund", tc.body)
		require.Equal(t, tc.status, status, tc.name)
		require.Equal(t, tc.code, v["error"].(map[string]any)["code"], tc.name)
	}
	require.Len(t, s.ProviderRefunds(t, charge.ProviderChargeId), 2, "no refusal reached the provider")

	prod := StartOn(t, dbURL, stripefake.Start(t).Env(map[string]string{"APP_ENV": "production"}))
	require.Equal(t, http.StatusNotFound, prod.Send(t, http.MethodPost, "/demo/refund", JSONHeaders(),
		strings.NewReader(demoRefundBody(t, map[string]any{"refundId": "refund-9", "chargeId": charge.Id}))).Status)
}

// TestDemoShopBackend_RefundSurvivesADroppedResponse: the demo's refund
// loses its answer when asked to, after the refund was made; the page's
// retry with the same refundId gets that refund, replayed, and the
// provider holds one.
func TestDemoShopBackend_RefundSurvivesADroppedResponse(t *testing.T) {
	t.Parallel()
	s := StartOn(t, dbtest.NewDatabase(t), nil)
	charged := s.ChargeCard(t, DemoAPIKeyDefault, NewKey(), Visa(1999))
	require.Equal(t, "SUCCEEDED", charged.Data.ChargeCard.Status)
	charge := charged.Data.ChargeCard.Charge
	body := demoRefundBody(t, map[string]any{"refundId": NewKey(), "chargeId": charge.Id})

	_, err := s.TrySend(http.MethodPost, "/demo/refund", JSONHeaders(devfault.Header, devfault.DropResponse), strings.NewReader(body))
	require.Error(t, err, "the answer is lost")
	refunds := s.ProviderRefunds(t, charge.ProviderChargeId)
	require.Len(t, refunds, 1, "the refund was made before its answer was lost")

	status, retry := s.demoShop(t, "/demo/refund", body)
	require.Equal(t, http.StatusOK, status, "%v", retry)
	require.Equal(t, "SUCCEEDED", retry["status"])
	require.Equal(t, true, retry["replayed"], "the retry is answered the refund the lost answer carried")
	got := retry["refund"].(map[string]any)
	require.EqualValues(t, 1999, got["amount"], "no amount: the whole charge")
	require.Equal(t, refunds[0]["id"], got["providerRefundId"])
	require.Len(t, s.ProviderRefunds(t, charge.ProviderChargeId), 1, "still one refund at the provider")
}
