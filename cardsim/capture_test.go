package cardsim_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/cardsim"
)

// Authorize now, capture later: a charge made with capture_method manual,
// its captures (POST /v1/captures), its void (POST /v1/voids) and its
// expiry.

// authorization mirrors what the wire form of a charge says of its
// authorization.
type authorization struct {
	ID                     string  `json:"id"`
	Status                 string  `json:"status"`
	CaptureMethod          string  `json:"capture_method"`
	AmountAuthorized       int64   `json:"amount_authorized"`
	AmountCaptured         int64   `json:"amount_captured"`
	AmountCapturable       int64   `json:"amount_capturable"`
	AmountVoided           int64   `json:"amount_voided"`
	AmountRefunded         int64   `json:"amount_refunded"`
	AuthorizationStatus    *string `json:"authorization_status"`
	AuthorizationExpiresAt *int64  `json:"authorization_expires_at"`
}

// captureObject mirrors the wire form of a capture, voidObject of a void.
type captureObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Charge         string            `json:"charge"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	Final          bool              `json:"final"`
	Status         string            `json:"status"`
	FailureCode    *string           `json:"failure_code"`
	FailureMessage *string           `json:"failure_message"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
}

type voidObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Charge         string            `json:"charge"`
	Status         string            `json:"status"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
}

type captureError struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Charge  string `json:"charge"`
		Capture string `json:"capture"`
	} `json:"error"`
}

func manualBody(paymentMethod string, amount int64) map[string]any {
	body := chargeBody(paymentMethod)
	body["amount"] = amount
	body["capture_method"] = "manual"
	return body
}

// authorize authorizes amount USD on paymentMethod and requires an open
// authorization of it.
func (s *sim) authorize(paymentMethod string, amount int64) authorization {
	s.t.Helper()
	resp, raw := s.mustPost(uniqueKey(s.t), manualBody(paymentMethod, amount))
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	a := decode[authorization](s.t, raw)
	require.Equal(s.t, "succeeded", a.Status)
	require.Equal(s.t, "open", deref(a.AuthorizationStatus))
	return a
}

// authorization reads charge id as it is now.
func (s *sim) authorization(id string) authorization {
	s.t.Helper()
	resp, raw := s.get("/v1/charges/" + url.PathEscape(id))
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	return decode[authorization](s.t, raw)
}

func captureBody(chargeID string, amount int64, final bool) map[string]any {
	body := map[string]any{
		"charge": chargeID, "final": final,
		"metadata": map[string]string{"chargeonce_kind": "capture", "merchant": "demo"},
	}
	if amount > 0 {
		body["amount"] = amount
	}
	return body
}

// postCapture sends POST /v1/captures; an error is a connection that gave
// no answer.
func (s *sim) postCapture(key string, body any) (*http.Response, []byte, error) {
	return s.postTo("/v1/captures", key, body)
}

// capture captures amount (0: what remains) of chargeID under a fresh key
// and requires that it is made.
func (s *sim) capture(chargeID string, amount int64, final bool) captureObject {
	s.t.Helper()
	resp, raw, err := s.postCapture(uniqueKey(s.t), captureBody(chargeID, amount, final))
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	return decode[captureObject](s.t, raw)
}

// requireRefused requires that resp, raw is the refusal code of chargeID.
func requireRefused(t *testing.T, resp *http.Response, raw []byte, chargeID, code string) {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
	e := decode[captureError](t, raw)
	require.Equal(t, "invalid_request_error", e.Error.Type)
	require.Equal(t, code, e.Error.Code, string(raw))
	require.Equal(t, chargeID, e.Error.Charge)
	require.NotEmpty(t, e.Error.Message)
}

// refusedCapture requires that capturing amount of chargeID is refused
// with code.
func (s *sim) refusedCapture(chargeID string, amount int64, code string) {
	s.t.Helper()
	resp, raw, err := s.postCapture(uniqueKey(s.t), captureBody(chargeID, amount, true))
	require.NoError(s.t, err)
	requireRefused(s.t, resp, raw, chargeID, code)
}

func voidBody(chargeID string) map[string]any {
	return map[string]any{"charge": chargeID, "metadata": map[string]string{"chargeonce_kind": "void", "merchant": "demo"}}
}

func (s *sim) postVoid(key string, body any) (*http.Response, []byte) {
	s.t.Helper()
	resp, raw, err := s.postTo("/v1/voids", key, body)
	require.NoError(s.t, err)
	require.Equal(s.t, "application/json", resp.Header.Get("Content-Type"))
	return resp, raw
}

func (s *sim) refusedVoid(chargeID, code string) {
	s.t.Helper()
	resp, raw := s.postVoid(uniqueKey(s.t), voidBody(chargeID))
	requireRefused(s.t, resp, raw, chargeID, code)
}

func (s *sim) captures(query url.Values) []captureObject {
	s.t.Helper()
	data, _ := listOf[captureObject](s, "/v1/captures", query)
	return data
}

func (s *sim) voids(query url.Values) []voidObject {
	s.t.Helper()
	data, _ := listOf[voidObject](s, "/v1/voids", query)
	return data
}

// expire makes charge id's open authorization expire now (the control).
func (s *sim) expire(id string) (*http.Response, []byte) {
	s.t.Helper()
	resp, raw, err := s.postTo("/v1/charges/"+url.PathEscape(id)+"/expire", "", "")
	require.NoError(s.t, err)
	return resp, raw
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestCreateCharge_Manual_AuthorizesForTheWindow(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{AuthorizationWindow: time.Hour})
	before := time.Now().Add(time.Hour).Unix()
	a := s.authorize("pm_card_visa", 1000)
	after := time.Now().Add(time.Hour).Unix()
	require.Equal(t, "manual", a.CaptureMethod)
	require.NotNil(t, a.AuthorizationExpiresAt)
	require.GreaterOrEqual(t, *a.AuthorizationExpiresAt, before-1, "a window from now")
	require.LessOrEqual(t, *a.AuthorizationExpiresAt, after+1)
	require.Equal(t, authorization{
		ID: a.ID, Status: "succeeded", CaptureMethod: "manual", AmountAuthorized: 1000, AmountCapturable: 1000,
		AuthorizationStatus: new("open"), AuthorizationExpiresAt: a.AuthorizationExpiresAt,
	}, a, "authorized, nothing captured")
	require.Equal(t, a, s.authorization(a.ID), "read as it was made")

	resp, raw := s.mustPost(uniqueKey(t), chargeBody("pm_card_visa"))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	auto := decode[authorization](t, raw)
	require.Equal(t, authorization{
		ID: auto.ID, Status: "succeeded", CaptureMethod: "automatic", AmountAuthorized: 1999, AmountCaptured: 1999,
	}, auto, "an automatic charge is no authorization: captured at once")
}

func TestCreateCharge_ManualDefaultWindow_IsSevenDays(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	before := time.Now().Add(cardsim.AuthorizationWindowDefault).Unix()
	a := s.authorize("pm_card_visa", 1000)
	require.InDelta(t, before, *a.AuthorizationExpiresAt, 5)
	require.Equal(t, 7*24*time.Hour, cardsim.AuthorizationWindowDefault)
}

func TestCreateCharge_CaptureMethod_IsPartOfTheRequest(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	key := uniqueKey(t)
	resp, raw := s.mustPost(key, manualBody("pm_card_visa", 1999))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))

	resp, raw = s.mustPost(key, chargeBody("pm_card_visa"))
	require.Equal(t, http.StatusConflict, resp.StatusCode, "the same key, automatic: another request: %s", raw)

	explicit := chargeBody("pm_card_visa")
	explicit["capture_method"] = "automatic"
	auto := uniqueKey(t)
	resp, raw = s.mustPost(auto, chargeBody("pm_card_visa"))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	resp, raw = s.mustPost(auto, explicit)
	require.Equal(t, http.StatusOK, resp.StatusCode, "automatic said or not is one request: %s", raw)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))

	for _, bad := range []any{"later", 1, true} {
		body := chargeBody("pm_card_visa")
		body["capture_method"] = bad
		key := uniqueKey(t)
		resp, raw := s.mustPost(key, body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
		require.Equal(t, "capture_method_invalid", decode[errorBody](t, raw).Error.Code)
		require.Zero(t, s.rowsWithKey(key))
	}
}

func TestCapture_PartThenFinal_CapturesBothAndReleasesTheRest(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	first := s.capture(a.ID, 300, false)
	require.Equal(t, captureObject{
		ID: first.ID, Object: "capture", Charge: a.ID, Amount: 300, Currency: "USD", Final: false, Status: "succeeded",
		IdempotencyKey: first.IdempotencyKey, Metadata: map[string]string{"chargeonce_kind": "capture", "merchant": "demo"},
		Created: first.Created,
	}, first)
	got := s.authorization(a.ID)
	require.Equal(t, "open", deref(got.AuthorizationStatus))
	require.Equal(t, int64(300), got.AmountCaptured)
	require.Equal(t, int64(700), got.AmountCapturable)

	final := s.capture(a.ID, 200, true)
	require.True(t, final.Final)
	got = s.authorization(a.ID)
	require.Equal(t, "captured", deref(got.AuthorizationStatus))
	require.Equal(t, int64(500), got.AmountCaptured)
	require.Zero(t, got.AmountCapturable, "the final capture released the other 500")

	s.refusedCapture(a.ID, 100, "charge_not_capturable")
	require.Equal(t, []string{final.ID, first.ID}, captureIDs(s.captures(url.Values{"charge": {a.ID}})))
}

func captureIDs(cs []captureObject) []string {
	ids := make([]string, 0, len(cs))
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestCapture_WithoutAmount_CapturesWhatRemains(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	s.capture(a.ID, 250, false)
	rest := s.capture(a.ID, 0, false)
	require.Equal(t, int64(750), rest.Amount)
	got := s.authorization(a.ID)
	require.Equal(t, "captured", deref(got.AuthorizationStatus), "all of it captured, final or not")
	require.Equal(t, int64(1000), got.AmountCaptured)
}

func TestCapture_SameKey_ReplaysTheCapture_OtherParameters409(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	key := uniqueKey(t)
	first, firstRaw, err := s.postCapture(key, captureBody(a.ID, 400, false))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, first.StatusCode, string(firstRaw))
	again, againRaw, err := s.postCapture(key, captureBody(a.ID, 400, false))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, again.StatusCode, string(againRaw))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, firstRaw, againRaw, "the first answer")

	for name, body := range map[string]map[string]any{
		"other amount":   captureBody(a.ID, 500, false),
		"final":          captureBody(a.ID, 400, true),
		"other metadata": {"charge": a.ID, "amount": 400, "final": false},
		"other charge":   captureBody(s.authorize("pm_card_visa", 1000).ID, 400, false),
	} {
		resp, raw, err := s.postCapture(key, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusConflict, resp.StatusCode, "%s: %s", name, raw)
		require.Equal(t, "idempotency_key_reused", decode[errorBody](t, raw).Error.Code)
	}
	require.Len(t, s.captures(url.Values{"idempotency_key": {key}}), 1)
	require.Equal(t, int64(400), s.authorization(a.ID).AmountCaptured, "captured once")
}

func TestCapture_Refused_StoresNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	s.capture(a.ID, 600, false)
	s.refusedCapture(a.ID, 600, "capture_exceeds_authorization")
	auto := s.newCharge("pm_card_visa")
	s.refusedCapture(auto, 100, "charge_not_capturable")
	declined := s.newCharge("pm_card_chargeDeclined")
	s.refusedCapture(declined, 100, "charge_not_capturable")
	s.refusedCapture("ch_nothing", 100, "resource_missing")

	body := captureBody(a.ID, 100, false)
	body["currency"] = "eur"
	resp, raw, err := s.postCapture(uniqueKey(t), body)
	require.NoError(t, err)
	requireRefused(t, resp, raw, a.ID, "currency_mismatch")
	body["currency"] = "usd"
	resp, raw, err = s.postCapture(uniqueKey(t), body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the charge's currency, in any case: %s", raw)

	require.Len(t, s.captures(url.Values{}), 2, "only the captures made")
	require.Equal(t, int64(700), s.authorization(a.ID).AmountCaptured)
}

func TestCapture_InvalidRequest_Returns400(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	for _, tt := range []struct {
		body any
		code string
	}{
		{map[string]any{"amount": 100}, "charge_missing"},
		{map[string]any{"charge": 42}, "charge_invalid"},
		{map[string]any{"charge": a.ID, "amount": 0}, "amount_invalid"},
		{map[string]any{"charge": a.ID, "amount": "100"}, "amount_invalid"},
		{map[string]any{"charge": a.ID, "final": "yes"}, "final_invalid"},
		{map[string]any{"charge": a.ID, "currency": "dollars"}, "currency_invalid"},
		{map[string]any{"charge": a.ID, "metadata": map[string]any{"k": nil}}, "metadata_invalid"},
		{"[]", "body_invalid"},
	} {
		resp, raw, err := s.postCapture(uniqueKey(t), tt.body)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
		require.Equal(t, tt.code, decode[errorBody](t, raw).Error.Code, "%v", tt.body)
	}
	resp, raw, err := s.postCapture("", captureBody(a.ID, 100, true))
	require.NoError(t, err)
	require.Equal(t, "idempotency_key_missing", decode[errorBody](t, raw).Error.Code, string(raw))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Empty(t, s.captures(url.Values{}))
}

func TestVoid_Open_VoidsIt_ThenCapturesAndVoidsAreRefused(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	key := uniqueKey(t)
	resp, raw := s.postVoid(key, voidBody(a.ID))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	v := decode[voidObject](t, raw)
	require.Equal(t, voidObject{
		ID: v.ID, Object: "void", Charge: a.ID, Status: "succeeded", IdempotencyKey: key,
		Metadata: map[string]string{"chargeonce_kind": "void", "merchant": "demo"},
	}, v)
	got := s.authorization(a.ID)
	require.Equal(t, "voided", deref(got.AuthorizationStatus))
	require.Equal(t, int64(1000), got.AmountVoided)
	require.Zero(t, got.AmountCaptured)
	require.Zero(t, got.AmountCapturable)

	again, againRaw := s.postVoid(key, voidBody(a.ID))
	require.Equal(t, http.StatusOK, again.StatusCode, string(againRaw))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, raw, againRaw)
	other, otherRaw := s.postVoid(key, voidBody(s.authorize("pm_card_visa", 1000).ID))
	require.Equal(t, http.StatusConflict, other.StatusCode, string(otherRaw))

	s.refusedCapture(a.ID, 100, "charge_voided")
	s.refusedVoid(a.ID, "charge_voided")
	require.Len(t, s.voids(url.Values{"charge": {a.ID}}), 1)
}

func TestVoid_AfterACapture_IsRefusedChargeCaptured(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	s.capture(a.ID, 100, false)
	s.refusedVoid(a.ID, "charge_captured")
	full := s.authorize("pm_card_visa", 1000)
	s.capture(full.ID, 0, true)
	s.refusedVoid(full.ID, "charge_captured")
	s.refusedVoid(s.newCharge("pm_card_visa"), "charge_not_capturable")
	require.Empty(t, s.voids(url.Values{}))
	require.Equal(t, "open", deref(s.authorization(a.ID).AuthorizationStatus))
}

func TestAuthorization_PastItsWindow_ReadsExpired_AndRefusesCaptureAndVoid(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{AuthorizationWindow: 500 * time.Millisecond})
	a := s.authorize("pm_card_visa", 1000)
	require.Eventually(t, func() bool {
		return deref(s.authorization(a.ID).AuthorizationStatus) == "expired"
	}, 10*time.Second, 50*time.Millisecond, "read after its window, it is expired")
	got := s.authorization(a.ID)
	require.Zero(t, got.AmountCaptured)
	require.Zero(t, got.AmountCapturable, "released")
	require.LessOrEqual(t, *got.AuthorizationExpiresAt, time.Now().Unix(), "when it lapsed")
	s.refusedCapture(a.ID, 100, "authorization_expired")
	s.refusedVoid(a.ID, "authorization_expired")
	require.Equal(t, []string{a.ID}, chargeIDs(s.list(url.Values{"authorization_status": {"expired"}})))
}

func TestAuthorization_Expired_KeepsWhatWasCaptured(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	s.capture(a.ID, 300, false)
	resp, raw := s.expire(a.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	got := s.authorization(a.ID)
	require.Equal(t, "expired", deref(got.AuthorizationStatus))
	require.Equal(t, int64(300), got.AmountCaptured, "captured before it expired")
	require.Zero(t, got.AmountCapturable)
	s.refusedCapture(a.ID, 100, "authorization_expired")

	resp, raw = s.expire(a.ID)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "only an open one expires: %s", raw)
	require.Equal(t, "charge_unexpected_state", decode[errorBody](t, raw).Error.Code)
	resp, raw = s.expire("ch_nothing")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(raw))
}

func TestAuthorization_NeedsAuthentication_OpensWhenTheShopperCompletes(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{AuthorizationWindow: time.Hour})
	body := authenticationBody(shopReturnURL)
	body["capture_method"] = "manual"
	resp, raw := s.mustPost(uniqueKey(t), body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	waiting := decode[authorization](t, raw)
	require.Equal(t, "requires_action", waiting.Status)
	require.Nil(t, waiting.AuthorizationStatus, "no authorization before the shopper authenticates")
	s.refusedCapture(waiting.ID, 100, "charge_not_capturable")

	completed, _ := s.press(waiting.ID, "complete")
	require.Equal(t, http.StatusSeeOther, completed.StatusCode)
	got := s.authorization(waiting.ID)
	require.Equal(t, "open", deref(got.AuthorizationStatus))
	require.InDelta(t, time.Now().Add(time.Hour).Unix(), *got.AuthorizationExpiresAt, 5, "a window from the authentication")
	s.capture(waiting.ID, 0, true)
	require.Equal(t, int64(1999), s.authorization(waiting.ID).AmountCaptured)
}

func TestRefund_OfAnAuthorization_OnlyWhatWasCaptured(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	s.refused(a.ID, 100, "charge_not_refundable")
	s.capture(a.ID, 400, false)
	s.refused(a.ID, 500, "amount_too_large")
	rf := s.refund(a.ID, 0)
	require.Equal(t, int64(400), rf.Amount, "all that was captured")
	require.Equal(t, int64(400), s.authorization(a.ID).AmountRefunded)
}

func TestCapture_DeclinedCard_Returns402AndStoresTheFailedCapture(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_captureDeclined", 1000)
	key := uniqueKey(t)
	for range 2 { // the first answer, then its replay
		resp, raw, err := s.postCapture(key, captureBody(a.ID, 1000, true))
		require.NoError(t, err)
		require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, string(raw))
		e := decode[captureError](t, raw)
		require.Equal(t, "card_error", e.Error.Type)
		require.Equal(t, "card_declined", e.Error.Code)
		require.Equal(t, a.ID, e.Error.Charge)
		stored := s.captures(url.Values{"idempotency_key": {key}})
		require.Len(t, stored, 1)
		require.Equal(t, e.Error.Capture, stored[0].ID)
		require.Equal(t, "failed", stored[0].Status)
	}
	got := s.authorization(a.ID)
	require.Equal(t, "open", deref(got.AuthorizationStatus), "nothing captured")
	require.Zero(t, got.AmountCaptured)
	require.Len(t, s.captures(url.Values{"status": {"failed"}}), 1)
	require.Empty(t, s.captures(url.Values{"status": {"succeeded"}}))
}

func TestCapture_LostResponseCard_CapturesOnceAndDropsEveryAnswer(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_captureLostResponse", 1000)
	key := uniqueKey(t)
	for i := range 3 {
		resp, _, err := s.postCapture(key, captureBody(a.ID, 1000, true))
		require.ErrorIs(t, err, io.EOF, "call %d: the connection closes without an answer", i)
		require.Nil(t, resp)
	}
	stored := s.captures(url.Values{"idempotency_key": {key}})
	require.Len(t, stored, 1, "made once")
	require.Equal(t, "succeeded", stored[0].Status)
	got := s.authorization(a.ID)
	require.Equal(t, "captured", deref(got.AuthorizationStatus))
	require.Equal(t, int64(1000), got.AmountCaptured)
	// A refusal is answered: nothing was made to lose.
	s.refusedCapture(a.ID, 100, "charge_not_capturable")
}

func TestCapture_SlowCard_TakesTheSlowDelay(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	s := newSim(t, cardsim.Config{SlowDelay: delay})
	a := s.authorize("pm_card_captureSlow", 1000)
	start := time.Now()
	s.capture(a.ID, 1000, true)
	require.GreaterOrEqual(t, time.Since(start), delay)
	fast := s.authorize("pm_card_visa", 1000)
	start = time.Now()
	s.capture(fast.ID, 1000, true)
	require.Less(t, time.Since(start), delay, "only the slow card's captures wait")
}

func TestListCaptures_Filters(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	b := s.authorize("pm_card_visa", 1000)
	attempt := "0b7c2c06-3a41-4a8e-9c53-1d7ef2b8e0a1"
	body := captureBody(a.ID, 100, false)
	body["metadata"] = map[string]string{"chargeonce_attempt_id": attempt, "merchant": "demo"}
	resp, raw, err := s.postCapture(uniqueKey(t), body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	withAttempt := decode[captureObject](t, raw)
	other := s.capture(a.ID, 100, false)
	ofB := s.capture(b.ID, 100, false)

	require.Equal(t, []string{other.ID, withAttempt.ID}, captureIDs(s.captures(url.Values{"charge": {a.ID}})))
	require.Equal(t, []string{withAttempt.ID}, captureIDs(s.captures(url.Values{"attempt_id": {attempt}})))
	require.Equal(t, []string{ofB.ID}, captureIDs(s.captures(url.Values{"idempotency_key": {ofB.IdempotencyKey}})))
	page, more := listOf[captureObject](s, "/v1/captures", url.Values{"limit": {"2"}})
	require.True(t, more)
	require.Equal(t, []string{ofB.ID, other.ID}, captureIDs(page))
	page, more = listOf[captureObject](s, "/v1/captures", url.Values{"limit": {"2"}, "starting_after": {other.ID}})
	require.False(t, more)
	require.Equal(t, []string{withAttempt.ID}, captureIDs(page))
	require.Equal(t, "status_invalid", listError(s, "/v1/captures", url.Values{"status": {"open"}}))
	require.Equal(t, "resource_missing", listError(s, "/v1/captures", url.Values{"starting_after": {"cp_nothing"}}))

	resp, raw = s.get("/v1/captures/" + other.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.Equal(t, other, decode[captureObject](t, raw))
	resp, _ = s.get("/v1/captures/cp_nothing")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = s.get("/v1/voids/vd_nothing")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestListCharges_ShowAuthorizedCapturedAndVoidedAmounts(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	open := s.authorize("pm_card_visa", 1000)
	s.capture(open.ID, 300, false)
	voided := s.authorize("pm_card_visa", 500)
	resp, raw := s.postVoid(uniqueKey(t), voidBody(voided.ID))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	auto := s.newCharge("pm_card_visa")

	data, _ := listOf[authorization](s, "/v1/charges", url.Values{})
	byID := map[string]authorization{}
	for _, c := range data {
		c.AuthorizationExpiresAt = nil // compared apart
		byID[c.ID] = c
	}
	require.Equal(t, authorization{
		ID: open.ID, Status: "succeeded", CaptureMethod: "manual", AmountAuthorized: 1000, AmountCaptured: 300,
		AmountCapturable: 700, AuthorizationStatus: new("open"),
	}, byID[open.ID])
	require.Equal(t, authorization{
		ID: voided.ID, Status: "succeeded", CaptureMethod: "manual", AmountAuthorized: 500, AmountVoided: 500,
		AuthorizationStatus: new("voided"),
	}, byID[voided.ID])
	require.Equal(t, authorization{
		ID: auto, Status: "succeeded", CaptureMethod: "automatic", AmountAuthorized: 1999, AmountCaptured: 1999,
	}, byID[auto])

	require.ElementsMatch(t, []string{open.ID, voided.ID}, chargeIDs(s.list(url.Values{"capture_method": {"manual"}})))
	require.Equal(t, []string{auto}, chargeIDs(s.list(url.Values{"capture_method": {"automatic"}})))
	require.Equal(t, []string{voided.ID}, chargeIDs(s.list(url.Values{"authorization_status": {"voided"}})))
	require.Equal(t, "capture_method_invalid", listError(s, "/v1/charges", url.Values{"capture_method": {"later"}}))
	require.Equal(t, "authorization_status_invalid", listError(s, "/v1/charges", url.Values{"authorization_status": {"held"}}))
}

func TestCaptureAndVoid_OtherMethods_Return405(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	for _, tt := range []struct{ method, path, allow string }{
		{http.MethodDelete, "/v1/captures", "GET, HEAD, POST"},
		{http.MethodPost, "/v1/captures/cp_1", "GET, HEAD"},
		{http.MethodPut, "/v1/voids", "GET, HEAD, POST"},
		{http.MethodPost, "/v1/voids/vd_1", "GET, HEAD"},
		{http.MethodGet, "/v1/charges/ch_1/expire", "POST"},
	} {
		resp, _ := s.send(tt.method, s.srv.URL+tt.path, "", "", nil)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", tt.method, tt.path)
		require.Equal(t, tt.allow, resp.Header.Get("Allow"))
	}
}

func TestExpire_PostFromAnotherSite_RefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	resp, _ := s.send(http.MethodPost, s.srv.URL+"/v1/charges/"+a.ID+"/expire", "", "",
		http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "open", deref(s.authorization(a.ID).AuthorizationStatus))
}

// race starts n calls of f at once and waits for them all.
func race(n int, f func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// answer is an HTTP answer of a call made off the test's goroutine; err is
// a connection that gave none.
type answer struct {
	status int
	raw    []byte
	err    error
}

func (s *sim) captureAnswer(key string, body any) answer {
	resp, raw, err := s.postCapture(key, body)
	if err != nil {
		return answer{err: err}
	}
	return answer{status: resp.StatusCode, raw: raw}
}

func TestCapture_TwentyKeysConcurrently_NeverCaptureMoreThanAuthorized(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	const n = 20
	answers := make([]answer, n)
	race(n, func(i int) {
		answers[i] = s.captureAnswer(fmt.Sprintf("%s-%d", uniqueKey(t), i), captureBody(a.ID, 600, false))
	})
	made := 0
	for i, ans := range answers {
		require.NoError(t, ans.err, "call %d", i)
		switch ans.status {
		case http.StatusOK:
			made++
		case http.StatusBadRequest:
			require.Equal(t, "capture_exceeds_authorization", decode[errorBody](t, ans.raw).Error.Code)
		default:
			require.Failf(t, "unexpected answer", "call %d: %d %s", i, ans.status, ans.raw)
		}
	}
	require.Equal(t, 1, made, "exactly one capture of 600 fits 1000")
	require.Len(t, s.captures(url.Values{"charge": {a.ID}}), 1)
	got := s.authorization(a.ID)
	require.Equal(t, int64(600), got.AmountCaptured)
	require.Equal(t, "open", deref(got.AuthorizationStatus))
}

func TestCapture_OneKeyFiftyTimesConcurrently_CapturesOnce(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	a := s.authorize("pm_card_visa", 1000)
	key := uniqueKey(t)
	const n = 50
	answers := make([]answer, n)
	race(n, func(i int) { answers[i] = s.captureAnswer(key, captureBody(a.ID, 400, false)) })
	ids := map[string]int{}
	for i, ans := range answers {
		require.NoError(t, ans.err, "call %d", i)
		require.Equal(t, http.StatusOK, ans.status, "call %d: %s", i, ans.raw)
		ids[decode[captureObject](t, ans.raw).ID]++
	}
	require.Len(t, ids, 1, "every call answers the one capture")
	require.Len(t, s.captures(url.Values{"charge": {a.ID}}), 1)
	require.Equal(t, int64(400), s.authorization(a.ID).AmountCaptured, "captured once")
}

// TestCapture_RacesVoid_ExactlyOneWins: a capture of all of an
// authorization and its void, at once. Whichever wins, the other is
// refused with the code that says so, and the authorization ends in the
// winner's state.
func TestCapture_RacesVoid_ExactlyOneWins(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	const rounds = 60
	wins := map[string]int{}
	for round := range rounds {
		a := s.authorize("pm_card_visa", 1000)
		var captured, voided answer
		race(2, func(i int) {
			if i == 0 {
				captured = s.captureAnswer(uniqueKey(t)+"-c", captureBody(a.ID, 1000, true))
				return
			}
			resp, raw, err := s.postTo("/v1/voids", uniqueKey(t)+"-v", voidBody(a.ID))
			if err == nil {
				voided = answer{status: resp.StatusCode, raw: raw}
			} else {
				voided = answer{err: err}
			}
		})
		require.NoError(t, captured.err)
		require.NoError(t, voided.err)
		got := s.authorization(a.ID)
		status := deref(got.AuthorizationStatus)
		wins[status]++
		switch status {
		case "captured":
			require.Equal(t, http.StatusOK, captured.status, "round %d: %s", round, captured.raw)
			require.Equal(t, http.StatusBadRequest, voided.status, "round %d: %s", round, voided.raw)
			require.Equal(t, "charge_captured", decode[errorBody](t, voided.raw).Error.Code)
			require.Equal(t, int64(1000), got.AmountCaptured)
			require.Empty(t, s.voids(url.Values{"charge": {a.ID}}))
		case "voided":
			require.Equal(t, http.StatusOK, voided.status, "round %d: %s", round, voided.raw)
			require.Equal(t, http.StatusBadRequest, captured.status, "round %d: %s", round, captured.raw)
			require.Equal(t, "charge_voided", decode[errorBody](t, captured.raw).Error.Code)
			require.Zero(t, got.AmountCaptured)
			require.Empty(t, s.captures(url.Values{"charge": {a.ID}}))
		default:
			require.Failf(t, "no single winner", "round %d: %q", round, status)
		}
	}
	t.Logf("of %d races, %v", rounds, wins)
}

// TestCapture_RacesTheWindow_EndsCapturedOrExpiredNeverBoth: captures sent
// about when authorizations lapse, while readers read them (and so expire
// them). Each ends captured, its capture answered 200, or expired, its
// capture refused authorization_expired; no reader sees it both ways.
func TestCapture_RacesTheWindow_EndsCapturedOrExpiredNeverBoth(t *testing.T) {
	t.Parallel()
	const window = 300 * time.Millisecond
	s := newSim(t, cardsim.Config{AuthorizationWindow: window})
	const rounds = 30
	wins := map[string]int{}
	for round := range rounds {
		a := s.authorize("pm_card_visa", 1000)
		// Spread the captures over the lapse, from 60 ms before to 60 ms after.
		time.Sleep(window - 60*time.Millisecond + time.Duration(round*4)*time.Millisecond)
		const readers = 3
		seen := make([][]string, readers)
		var captured answer
		var sent, answered time.Time
		race(readers+1, func(i int) {
			if i == readers {
				sent = time.Now()
				captured = s.captureAnswer(uniqueKey(t), captureBody(a.ID, 1000, true))
				answered = time.Now()
				return
			}
			for range 5 {
				resp, raw := s.get("/v1/charges/" + a.ID)
				if !assert.Equal(t, http.StatusOK, resp.StatusCode) {
					return
				}
				seen[i] = append(seen[i], deref(decode[authorization](t, raw).AuthorizationStatus))
			}
		})
		require.NoError(t, captured.err)
		got := s.authorization(a.ID)
		status := deref(got.AuthorizationStatus)
		wins[status]++
		// The wire says when in seconds; the database, to the microsecond,
		// by the clock of this machine.
		var expiresAt time.Time
		require.NoError(t, s.pool.QueryRow(t.Context(),
			"SELECT authorization_expires_at FROM cardsim.charges WHERE id = $1", a.ID).Scan(&expiresAt))
		switch status {
		case "captured":
			require.Equal(t, http.StatusOK, captured.status, "round %d: %s", round, captured.raw)
			require.Equal(t, int64(1000), got.AmountCaptured)
			require.True(t, sent.Before(expiresAt), "round %d: captured, though sent after it lapsed", round)
		case "expired":
			require.True(t, answered.After(expiresAt), "round %d: expired, though refused before it lapsed", round)
			require.Equal(t, http.StatusBadRequest, captured.status, "round %d: %s", round, captured.raw)
			require.Equal(t, "authorization_expired", decode[errorBody](t, captured.raw).Error.Code)
			require.Zero(t, got.AmountCaptured)
		default:
			require.Failf(t, "neither captured nor expired", "round %d: %q", round, status)
		}
		for i, statuses := range seen {
			for _, st := range statuses {
				require.Contains(t, []string{"open", status}, st,
					"round %d, reader %d saw %v, and it ended %s", round, i, statuses, status)
			}
		}
	}
	t.Logf("of %d races, %v", rounds, wins)
}

// TestCapture_OneKeyForTwoChargesConcurrently_OneCaptureAndA409: the two
// requests lock different charges, so only the key's own uniqueness stands
// between them.
func TestCapture_OneKeyForTwoChargesConcurrently_OneCaptureAndA409(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	for round := range 20 {
		first, second := s.authorize("pm_card_visa", 1000), s.authorize("pm_card_visa", 1000)
		key := fmt.Sprintf("%s-%d", uniqueKey(t), round)
		answers := make([]answer, 2)
		race(2, func(i int) {
			answers[i] = s.captureAnswer(key, captureBody([]string{first.ID, second.ID}[i], 1000, true))
		})
		statuses := []int{answers[0].status, answers[1].status}
		require.ElementsMatch(t, []int{http.StatusOK, http.StatusConflict}, statuses, "round %d: %s / %s", round, answers[0].raw, answers[1].raw)
		captured := first.ID
		if answers[1].status == http.StatusOK {
			captured = second.ID
		}
		made := s.captures(url.Values{"idempotency_key": {key}})
		require.Len(t, made, 1)
		require.Equal(t, captured, made[0].Charge)
		require.Equal(t, int64(1000), s.authorization(captured).AmountCaptured)
		other := first.ID
		if captured == first.ID {
			other = second.ID
		}
		require.Zero(t, s.authorization(other).AmountCaptured, "round %d: the refused request captured nothing", round)
	}
}
