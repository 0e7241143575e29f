package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/devfault"
	"chargeonce/internal/app"
	"chargeonce/provider/stripe/stripefake"
)

// demoShop posts body to one of the demo's shop backend routes and decodes
// its JSON answer.
func demoShop(t *testing.T, s *apitest.Server, path, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	r := s.Send(t, http.MethodPost, path, apitest.JSONHeaders(headers...), strings.NewReader(body))
	var v map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &v), "%s", r.Body)
	return r.Status, v
}

// demoBody is the JSON of a request to one of the shop backend routes.
func demoBody(t *testing.T, fields map[string]any) string {
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
	s := apitest.StartOn(t, dbURL, nil)
	charged := s.ChargeCard(t, app.DemoAPIKeyDefault, apitest.NewKey(), apitest.Visa(100))
	require.Equal(t, "SUCCEEDED", charged.Data.ChargeCard.Status)
	charge := charged.Data.ChargeCard.Charge
	refund := func(fields map[string]any) (int, map[string]any) {
		return demoShop(t, s, "/demo/refund", demoBody(t, fields))
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
		{"the refundId again, another amount", demoBody(t, map[string]any{"refundId": "refund-1", "chargeId": charge.Id, "amount": 31}), http.StatusConflict, "IDEMPOTENCY_KEY_REUSED"},
		{"an unknown charge", demoBody(t, map[string]any{"refundId": "refund-4", "chargeId": apitest.NewKey()}), http.StatusNotFound, "CHARGE_NOT_FOUND"},
		{"no refundId", demoBody(t, map[string]any{"refundId": "", "chargeId": charge.Id}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"a refundId too long", demoBody(t, map[string]any{"refundId": strings.Repeat("r", 101), "chargeId": charge.Id}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"not a charge id", demoBody(t, map[string]any{"refundId": "refund-5", "chargeId": "ch_1"}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"an amount of 0", demoBody(t, map[string]any{"refundId": "refund-6", "chargeId": charge.Id, "amount": 0}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"an unknown field", demoBody(t, map[string]any{"refundId": "refund-7", "chargeId": charge.Id, "key": "x"}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"not JSON", `not json`, http.StatusBadRequest, "BAD_USER_INPUT"},
	} {
		status, v := demoShop(t, s, "/demo/refund", tc.body)
		require.Equal(t, tc.status, status, tc.name)
		require.Equal(t, tc.code, v["error"].(map[string]any)["code"], tc.name)
	}
	require.Len(t, s.ProviderRefunds(t, charge.ProviderChargeId), 2, "no refusal reached the provider")

	prod := apitest.StartOn(t, dbURL, stripefake.Start(t).Env(map[string]string{"APP_ENV": "production"}))
	require.Equal(t, http.StatusNotFound, prod.Send(t, http.MethodPost, "/demo/refund", apitest.JSONHeaders(),
		strings.NewReader(demoBody(t, map[string]any{"refundId": "refund-9", "chargeId": charge.Id}))).Status)
}

// TestDemoShopBackend_RefundSurvivesADroppedResponse: the demo's refund
// loses its answer when asked to, after the refund was made; the page's
// retry with the same refundId gets that refund, replayed, and the
// provider holds one.
func TestDemoShopBackend_RefundSurvivesADroppedResponse(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	charged := s.ChargeCard(t, app.DemoAPIKeyDefault, apitest.NewKey(), apitest.Visa(1999))
	require.Equal(t, "SUCCEEDED", charged.Data.ChargeCard.Status)
	charge := charged.Data.ChargeCard.Charge
	body := demoBody(t, map[string]any{"refundId": apitest.NewKey(), "chargeId": charge.Id})

	_, err := s.TrySend(http.MethodPost, "/demo/refund", apitest.JSONHeaders(devfault.Header, devfault.DropResponse), strings.NewReader(body))
	require.Error(t, err, "the answer is lost")
	refunds := s.ProviderRefunds(t, charge.ProviderChargeId)
	require.Len(t, refunds, 1, "the refund was made before its answer was lost")

	status, retry := demoShop(t, s, "/demo/refund", body)
	require.Equal(t, http.StatusOK, status, "%v", retry)
	require.Equal(t, "SUCCEEDED", retry["status"])
	require.Equal(t, true, retry["replayed"], "the retry is answered the refund the lost answer carried")
	got := retry["refund"].(map[string]any)
	require.EqualValues(t, 1999, got["amount"], "no amount: the whole charge")
	require.Equal(t, refunds[0]["id"], got["providerRefundId"])
	require.Len(t, s.ProviderRefunds(t, charge.ProviderChargeId), 1, "still one refund at the provider")
}

// TestDemoBackend_CrossSiteOrNotJSON_RefusedAndDoesNothing: the demo's
// shop backend spends the demo merchant's secret key, so it takes only a
// JSON POST from its own pages. A cross-site form (text/plain, form-encoded,
// multipart: what a form can send without a preflight) is 415, and a JSON
// POST from another origin or marked cross-site by the browser is 403;
// nothing is refunded, captured, voided or created. The demo page's own
// request still works.
func TestDemoBackend_CrossSiteOrNotJSON_RefusedAndDoesNothing(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.StartOn(t, dbURL, nil)
	charged := s.ChargeCard(t, app.DemoAPIKeyDefault, apitest.NewKey(), apitest.Visa(700))
	require.Equal(t, "SUCCEEDED", charged.Data.ChargeCard.Status)
	charge := charged.Data.ChargeCard.Charge
	auth := authorized(t, s, 700)
	refund := demoBody(t, map[string]any{"refundId": "cross-site", "chargeId": charge.Id})
	session := `{"cartId":"cross-site","amount":100,"currency":"USD"}`
	bodies := map[string]string{
		"/demo/refund": refund, "/demo/checkout-session": session,
		"/demo/capture": demoBody(t, map[string]any{"captureId": "cross-site", "chargeId": auth.Id}),
		"/demo/void":    demoBody(t, map[string]any{"voidId": "cross-site", "chargeId": auth.Id}),
	}

	for _, tc := range []struct {
		name    string
		headers http.Header
		status  int
		code    string
	}{
		{"the attacker's form, as a browser posts it", http.Header{"Content-Type": {"text/plain"}, "Origin": {"https://attacker.example"}, "Sec-Fetch-Site": {"cross-site"}},
			http.StatusUnsupportedMediaType, "BAD_REQUEST"},
		{"text/plain", http.Header{"Content-Type": {"text/plain;charset=UTF-8"}}, http.StatusUnsupportedMediaType, "BAD_REQUEST"},
		{"form-encoded", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, http.StatusUnsupportedMediaType, "BAD_REQUEST"},
		{"multipart", http.Header{"Content-Type": {"multipart/form-data; boundary=x"}}, http.StatusUnsupportedMediaType, "BAD_REQUEST"},
		{"no media type", http.Header{}, http.StatusUnsupportedMediaType, "BAD_REQUEST"},
		{"JSON from another origin", apitest.JSONHeaders("Origin", "https://attacker.example"), http.StatusForbidden, "FORBIDDEN"},
		{"JSON from an opaque origin", apitest.JSONHeaders("Origin", "null"), http.StatusForbidden, "FORBIDDEN"},
		{"JSON marked cross-site", apitest.JSONHeaders("Sec-Fetch-Site", "cross-site"), http.StatusForbidden, "FORBIDDEN"},
		{"JSON from another port of this host", apitest.JSONHeaders("Origin", s.URL+":8443"), http.StatusForbidden, "FORBIDDEN"},
	} {
		for path, body := range bodies {
			r := s.Send(t, http.MethodPost, path, tc.headers, strings.NewReader(body))
			require.Equal(t, tc.status, r.Status, "%s %s: %s", tc.name, path, r.Body)
			var v struct {
				Error struct{ Code, Message string }
			}
			require.NoError(t, json.Unmarshal(r.Body, &v), "%s", r.Body)
			require.Equal(t, tc.code, v.Error.Code, "%s %s", tc.name, path)
		}
	}
	require.Empty(t, s.ProviderRefunds(t, charge.ProviderChargeId), "no refund")
	require.Empty(t, providerCaptures(t, s, auth.ProviderChargeId), "no capture")
	require.Empty(t, providerVoids(t, s, auth.ProviderChargeId), "no void")
	require.Zero(t, apitest.CountRows(t, dbtest.Open(t, dbURL), "SELECT count(*)::int FROM checkout_sessions"), "no session")

	// The demo page's own request: JSON, from its own origin.
	status, v := demoShop(t, s, "/demo/refund", refund, "Origin", s.URL, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusOK, status, "%v", v)
	require.Len(t, s.ProviderRefunds(t, charge.ProviderChargeId), 1)
}
