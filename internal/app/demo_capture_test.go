package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/devfault"
	"chargeonce/internal/apiclient"
	"chargeonce/provider/stripe/stripefake"
)

// providerCaptures are the captures the simulated provider holds of its
// charge: the ground truth of how often money was taken.
func providerCaptures(t *testing.T, s *apitest.Server, providerChargeID string) []apiclient.ProviderCapture {
	t.Helper()
	captures, err := s.API(apiclient.DemoAPIKey).ListProviderCaptures(context.Background(), apiclient.ProviderCaptureFilter{Charge: providerChargeID})
	require.NoError(t, err)
	return captures
}

// providerVoids are the voids the simulated provider holds of its charge.
func providerVoids(t *testing.T, s *apitest.Server, providerChargeID string) []apiclient.ProviderVoid {
	t.Helper()
	voids, err := s.API(apiclient.DemoAPIKey).ListProviderVoids(context.Background(), apiclient.ProviderVoidFilter{Charge: providerChargeID})
	require.NoError(t, err)
	return voids
}

// authorized authorizes amount with the demo merchant's secret key, and
// answers the charge as chargeonce holds it.
func authorized(t *testing.T, s *apitest.Server, amount int) *apiclient.CapturedCharge {
	t.Helper()
	_, key := s.Authorize(t, apitest.Visa(amount))
	c, err := s.API(apiclient.DemoAPIKey).ChargeCaptures(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusUncaptured, c.CaptureStatus)
	return c
}

// charge is the "charge" of a shop backend's answer.
func charge(t *testing.T, answer map[string]any) map[string]any {
	t.Helper()
	c, ok := answer["charge"].(map[string]any)
	require.True(t, ok, "the answer has the charge as it is now: %v", answer)
	return c
}

// refusal is the error code of a shop backend's answer, and the answer.
func refusal(t *testing.T, answer map[string]any) (string, map[string]any) {
	t.Helper()
	e, ok := answer["error"].(map[string]any)
	require.True(t, ok, "a refusal: %v", answer)
	return e["code"].(string), e
}

// TestDemoShopBackend_CapturesOncePerCaptureID: the demo's shop backend
// ships an authorized order by capturing it with the secret key on the
// server side, once per captureId (a retry gets the stored capture,
// replayed), in parts or in full, and answers the charge as it is now; it
// refuses clearly what the charge no longer allows, with what remains
// capturable, and a malformed request. It does not exist in production.
func TestDemoShopBackend_CapturesOncePerCaptureID(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.StartOn(t, dbURL, nil)
	auth := authorized(t, s, 1000)
	capture := func(fields map[string]any) (int, map[string]any) {
		return demoShop(t, s, "/demo/capture", demoBody(t, fields))
	}

	status, first := capture(map[string]any{"captureId": "ship-1", "chargeId": auth.Id, "amount": 400, "final": false})
	require.Equal(t, http.StatusOK, status, "%v", first)
	require.Equal(t, "SUCCEEDED", first["status"])
	require.Equal(t, false, first["replayed"])
	got := first["capture"].(map[string]any)
	require.Equal(t, auth.Id, got["chargeId"])
	require.EqualValues(t, 400, got["amount"])
	require.Equal(t, false, got["final"])
	now := charge(t, first)
	require.Equal(t, "PARTIALLY_CAPTURED", now["captureStatus"])
	require.EqualValues(t, 400, now["amountCaptured"])
	require.EqualValues(t, 600, now["amountCapturable"])
	require.NotEmpty(t, now["authorizationExpiresAt"], "an open authorization lapses")
	require.Equal(t, auth.ProviderChargeId, now["providerChargeId"])
	require.NotContains(t, first, "retryAfterMs", "a final answer has no wait")

	status, again := capture(map[string]any{"captureId": "ship-1", "chargeId": auth.Id, "amount": 400, "final": false})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, again["replayed"])
	require.Equal(t, got["id"], again["capture"].(map[string]any)["id"], "the same captureId, the same capture")
	require.Len(t, providerCaptures(t, s, auth.ProviderChargeId), 1, "one capture reached the provider")

	status, tooMuch := capture(map[string]any{"captureId": "ship-2", "chargeId": auth.Id, "amount": 601})
	require.Equal(t, http.StatusConflict, status)
	code, refused := refusal(t, tooMuch)
	require.Equal(t, "CAPTURE_EXCEEDS_AUTHORIZATION", code)
	require.EqualValues(t, 600, refused["capturable"], "the answer says what remains")

	status, rest := capture(map[string]any{"captureId": "ship-3", "chargeId": auth.Id})
	require.Equal(t, http.StatusOK, status, "%v", rest)
	require.EqualValues(t, 600, rest["capture"].(map[string]any)["amount"], "no amount: all that is capturable")
	require.Equal(t, true, rest["capture"].(map[string]any)["final"], "final by default")
	now = charge(t, rest)
	require.Equal(t, "CAPTURED", now["captureStatus"])
	require.EqualValues(t, 1000, now["amountCaptured"])
	require.EqualValues(t, 0, now["amountCapturable"])
	require.Nil(t, now["authorizationExpiresAt"], "captured in full: nothing lapses")

	automatic := s.ChargeCard(t, apiclient.DemoAPIKey, apitest.NewKey(), apitest.Visa(100)).Data.ChargeCard.Charge
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		code   string
	}{
		{"captured in full", map[string]any{"captureId": "ship-4", "chargeId": auth.Id}, http.StatusConflict, "CHARGE_NOT_CAPTURABLE"},
		{"an automatic charge", map[string]any{"captureId": "ship-5", "chargeId": automatic.Id}, http.StatusConflict, "CHARGE_NOT_CAPTURABLE"},
		{"the captureId again, another amount", map[string]any{"captureId": "ship-1", "chargeId": auth.Id, "amount": 401, "final": false}, http.StatusConflict, "IDEMPOTENCY_KEY_REUSED"},
		{"an unknown charge", map[string]any{"captureId": "ship-6", "chargeId": apitest.NewKey()}, http.StatusNotFound, "CHARGE_NOT_FOUND"},
		{"no captureId", map[string]any{"captureId": "", "chargeId": auth.Id}, http.StatusBadRequest, "BAD_USER_INPUT"},
		{"a captureId too long", map[string]any{"captureId": strings.Repeat("c", 101), "chargeId": auth.Id}, http.StatusBadRequest, "BAD_USER_INPUT"},
		{"not a charge id", map[string]any{"captureId": "ship-7", "chargeId": "ch_1"}, http.StatusBadRequest, "BAD_USER_INPUT"},
		{"an amount of 0", map[string]any{"captureId": "ship-8", "chargeId": auth.Id, "amount": 0}, http.StatusBadRequest, "BAD_USER_INPUT"},
		{"an unknown field", map[string]any{"captureId": "ship-9", "chargeId": auth.Id, "key": "x"}, http.StatusBadRequest, "BAD_USER_INPUT"},
	} {
		status, v := capture(tc.body)
		require.Equal(t, tc.status, status, "%s: %v", tc.name, v)
		code, _ := refusal(t, v)
		require.Equal(t, tc.code, code, tc.name)
	}
	status, v := demoShop(t, s, "/demo/capture", `not json`)
	require.Equal(t, http.StatusBadRequest, status)
	code, _ = refusal(t, v)
	require.Equal(t, "BAD_USER_INPUT", code)
	captures := providerCaptures(t, s, auth.ProviderChargeId)
	require.Len(t, captures, 2, "no refusal reached the provider")
	require.EqualValues(t, 1000, captures[0].Amount+captures[1].Amount)

	prod := apitest.StartOn(t, dbURL, stripefake.Start(t).Env(map[string]string{"APP_ENV": "production"}))
	for _, path := range []string{"/demo/capture", "/demo/void"} {
		body := demoBody(t, map[string]any{"captureId": "ship-10", "voidId": "cancel-1", "chargeId": auth.Id})
		require.Equal(t, http.StatusNotFound, prod.Send(t, http.MethodPost, path, apitest.JSONHeaders(), strings.NewReader(body)).Status, path)
	}
}

// TestDemoShopBackend_CaptureSurvivesADroppedResponse: Ship order loses
// its answer when asked to, after the capture was made; the page's retry
// with the same captureId gets that capture, replayed, and the provider
// holds one capture, under one key.
func TestDemoShopBackend_CaptureSurvivesADroppedResponse(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	auth := authorized(t, s, 11300)
	body := demoBody(t, map[string]any{"captureId": apitest.NewKey(), "chargeId": auth.Id})

	_, err := s.TrySend(http.MethodPost, "/demo/capture", apitest.JSONHeaders(devfault.Header, devfault.DropResponse), strings.NewReader(body))
	require.Error(t, err, "the answer is lost")
	captures := providerCaptures(t, s, auth.ProviderChargeId)
	require.Len(t, captures, 1, "the capture was made before its answer was lost")

	status, retry := demoShop(t, s, "/demo/capture", body)
	require.Equal(t, http.StatusOK, status, "%v", retry)
	require.Equal(t, "SUCCEEDED", retry["status"])
	require.Equal(t, true, retry["replayed"], "the retry is answered the capture the lost answer carried")
	require.EqualValues(t, 11300, retry["capture"].(map[string]any)["amount"])
	require.Equal(t, "CAPTURED", charge(t, retry)["captureStatus"])
	again := providerCaptures(t, s, auth.ProviderChargeId)
	require.Len(t, again, 1, "still one capture at the provider")
	require.Equal(t, captures[0].IdempotencyKey, again[0].IdempotencyKey)
}

// TestDemoShopBackend_VoidsOncePerVoidID: Cancel order voids the
// authorization once per voidId, through a lost answer too (the retry is
// replayed, the provider holds one void); a voided order can no longer be
// shipped, and a shipped one no longer cancelled.
func TestDemoShopBackend_VoidsOncePerVoidID(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	auth := authorized(t, s, 2500)
	body := demoBody(t, map[string]any{"voidId": "cancel-1", "chargeId": auth.Id})

	_, err := s.TrySend(http.MethodPost, "/demo/void", apitest.JSONHeaders(devfault.Header, devfault.DropResponse), strings.NewReader(body))
	require.Error(t, err, "the answer is lost")
	require.Len(t, providerVoids(t, s, auth.ProviderChargeId), 1, "the void was made before its answer was lost")

	status, retry := demoShop(t, s, "/demo/void", body)
	require.Equal(t, http.StatusOK, status, "%v", retry)
	require.Equal(t, "SUCCEEDED", retry["status"])
	require.Equal(t, true, retry["replayed"])
	require.Equal(t, auth.Id, retry["void"].(map[string]any)["chargeId"])
	now := charge(t, retry)
	require.Equal(t, "VOIDED", now["captureStatus"])
	require.EqualValues(t, 0, now["amountCaptured"])
	require.EqualValues(t, 0, now["amountCapturable"])
	require.Nil(t, now["authorizationExpiresAt"])
	require.Len(t, providerVoids(t, s, auth.ProviderChargeId), 1, "still one void at the provider")

	status, v := demoShop(t, s, "/demo/capture", demoBody(t, map[string]any{"captureId": "ship-1", "chargeId": auth.Id}))
	require.Equal(t, http.StatusConflict, status)
	code, _ := refusal(t, v)
	require.Equal(t, "CHARGE_VOIDED", code, "a cancelled order does not ship")
	require.Empty(t, providerCaptures(t, s, auth.ProviderChargeId))

	shipped := authorized(t, s, 2500)
	status, v = demoShop(t, s, "/demo/capture", demoBody(t, map[string]any{"captureId": "ship-2", "chargeId": shipped.Id}))
	require.Equal(t, http.StatusOK, status, "%v", v)
	for _, tc := range []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"a shipped order", demoBody(t, map[string]any{"voidId": "cancel-2", "chargeId": shipped.Id}), http.StatusConflict, "CHARGE_CAPTURED"},
		{"no voidId", demoBody(t, map[string]any{"voidId": "", "chargeId": auth.Id}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"a voidId too long", demoBody(t, map[string]any{"voidId": strings.Repeat("v", 101), "chargeId": auth.Id}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"not a charge id", demoBody(t, map[string]any{"voidId": "cancel-3", "chargeId": "ch_1"}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"an unknown charge", demoBody(t, map[string]any{"voidId": "cancel-4", "chargeId": apitest.NewKey()}), http.StatusNotFound, "CHARGE_NOT_FOUND"},
		{"an amount", demoBody(t, map[string]any{"voidId": "cancel-5", "chargeId": auth.Id, "amount": 1}), http.StatusBadRequest, "BAD_USER_INPUT"},
		{"not JSON", `not json`, http.StatusBadRequest, "BAD_USER_INPUT"},
	} {
		status, v := demoShop(t, s, "/demo/void", tc.body)
		require.Equal(t, tc.status, status, "%s: %v", tc.name, v)
		code, _ := refusal(t, v)
		require.Equal(t, tc.code, code, tc.name)
	}
	require.Empty(t, providerVoids(t, s, shipped.ProviderChargeId), "the refused void reached no provider")
}

// TestDemoShopBackend_ManualCheckoutSession_AuthorizesForShipping: a cart's
// checkout session asked for with captureMethod MANUAL pays as an
// authorization only, which Ship order then captures; the cart keeps its
// capture method (the same cart with another is refused, as its session
// is keyed on the cart), and only the API's two names are taken.
func TestDemoShopBackend_ManualCheckoutSession_AuthorizesForShipping(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	session := func(fields map[string]any) (int, map[string]any) {
		return demoShop(t, s, "/demo/checkout-session", demoBody(t, fields))
	}
	cart := map[string]any{"cartId": "cart-manual", "amount": 11300, "currency": "USD", "captureMethod": "MANUAL"}
	status, created := session(cart)
	require.Equal(t, http.StatusOK, status, "%v", created)
	require.Equal(t, "MANUAL", created["captureMethod"])
	status, again := session(cart)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, again["replayed"])
	require.Equal(t, created["clientSecret"], again["clientSecret"])

	for _, tc := range []struct {
		name   string
		fields map[string]any
		status int
		code   string
	}{
		{"the cart again, automatic", map[string]any{"cartId": "cart-manual", "amount": 11300, "currency": "USD", "captureMethod": "AUTOMATIC"}, http.StatusConflict, "IDEMPOTENCY_KEY_REUSED"},
		{"the cart again, no method (automatic)", map[string]any{"cartId": "cart-manual", "amount": 11300, "currency": "USD"}, http.StatusConflict, "IDEMPOTENCY_KEY_REUSED"},
		{"another name", map[string]any{"cartId": "cart-later", "amount": 11300, "currency": "USD", "captureMethod": "later"}, http.StatusBadRequest, "BAD_USER_INPUT"},
	} {
		status, v := session(tc.fields)
		require.Equal(t, tc.status, status, "%s: %v", tc.name, v)
		code, _ := refusal(t, v)
		require.Equal(t, tc.code, code, tc.name)
	}
	status, automatic := session(map[string]any{"cartId": "cart-automatic", "amount": 100, "currency": "USD"})
	require.Equal(t, http.StatusOK, status, "%v", automatic)
	require.Equal(t, "AUTOMATIC", automatic["captureMethod"], "no method: the money is taken at once")

	key := apitest.NewKey()
	paid := s.PaySession(t, key, created["clientSecret"].(string), "pm_card_visa", nil)
	require.Empty(t, paid.Errors)
	require.Equal(t, "SUCCEEDED", paid.Data.ChargeCard.Status, "the card is authorized")
	chargeID := paid.Data.ChargeCard.Charge.Id
	held, err := s.API(apiclient.DemoAPIKey).ChargeCaptures(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusUncaptured, held.CaptureStatus)
	require.Equal(t, 11300, held.AmountCapturable)

	status, shipped := demoShop(t, s, "/demo/capture", demoBody(t, map[string]any{"captureId": "ship", "chargeId": chargeID}))
	require.Equal(t, http.StatusOK, status, "%v", shipped)
	require.Equal(t, "CAPTURED", charge(t, shipped)["captureStatus"])
	require.EqualValues(t, 11300, charge(t, shipped)["amountCaptured"])
	require.Len(t, providerCaptures(t, s, held.ProviderChargeId), 1)
}
