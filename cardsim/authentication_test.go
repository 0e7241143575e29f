package cardsim_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/cardsim"
	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
)

// The 3-D Secure flow of pm_card_authenticationRequired: a charge with a
// return_url waits (requires_action) until its challenge page completes or
// fails it, or its caller cancels it.

const (
	tokenAuthentication = "pm_card_authenticationRequired"
	// shopReturnURL is where chargeonce sends shoppers back, its key in the
	// query; the simulator must redirect to it verbatim.
	shopReturnURL = "https://shop.example/checkout/done?chargeonce_key=client-1&lang=en"
)

func authenticationBody(returnURL string) map[string]any {
	body := chargeBody(tokenAuthentication)
	body["return_url"] = returnURL
	return body
}

// waitingCharge creates a charge that waits for authentication.
func (s *sim) waitingCharge(key string) charge {
	s.t.Helper()
	resp, raw := s.mustPost(key, authenticationBody(shopReturnURL))
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	c := decode[charge](s.t, raw)
	require.Equal(s.t, "requires_action", c.Status)
	return c
}

// send sends a request as a browser's form would, or a caller's POST, and
// never follows a redirect: the tests read the 303 itself.
func (s *sim) send(method, target, contentType, body string, header http.Header) (*http.Response, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	require.NoError(s.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for name, values := range header {
		req.Header[name] = values
	}
	client := *s.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp, string(raw)
}

func (s *sim) page(id string) (*http.Response, string) {
	s.t.Helper()
	return s.send(http.MethodGet, s.srv.URL+"/authenticate/"+id, "", "", nil)
}

func (s *sim) press(id, button string) (*http.Response, string) {
	s.t.Helper()
	return s.send(http.MethodPost, s.srv.URL+"/authenticate/"+id+"/"+button, "application/x-www-form-urlencoded", "", nil)
}

func (s *sim) cancel(id, reason string) (*http.Response, []byte) {
	s.t.Helper()
	form := url.Values{}
	if reason != "" {
		form.Set("cancellation_reason", reason)
	}
	resp, raw := s.send(http.MethodPost, s.srv.URL+"/v1/charges/"+id+"/cancel", "application/x-www-form-urlencoded", form.Encode(), nil)
	require.Equal(s.t, "application/json", resp.Header.Get("Content-Type"))
	return resp, []byte(raw)
}

func (s *sim) charge(id string) charge {
	s.t.Helper()
	resp, raw := s.get("/v1/charges/" + id)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	return decode[charge](s.t, raw)
}

// storedStatus reads the charge's status in the database itself.
func (s *sim) storedStatus(id string) string {
	s.t.Helper()
	var status string
	require.NoError(s.t, s.pool.QueryRow(s.t.Context(), "SELECT status FROM cardsim.charges WHERE id = $1", id).Scan(&status))
	return status
}

// formAction is the absolute address that the page's form for button
// posts to, resolved as a browser resolves it against the page's address.
func formAction(t *testing.T, pageURL, html, button string) string {
	t.Helper()
	m := regexp.MustCompile(`<form method="post" action="([^"]+)"><button type="submit" class="` + button + `">`).FindStringSubmatch(html)
	require.NotNil(t, m, "the page has a %s button in a POST form:\n%s", button, html)
	base, err := url.Parse(pageURL)
	require.NoError(t, err)
	action, err := url.Parse(m[1])
	require.NoError(t, err)
	return base.ResolveReference(action).String()
}

func TestCreateCharge_AuthenticationRequiredWithoutReturnURL_Returns402AuthenticationRequired(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	key := uniqueKey(t)
	resp, raw := s.mustPost(key, chargeBody(tokenAuthentication))
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, string(raw))
	e := decode[errorBody](t, raw)
	require.Equal(t, "card_error", e.Error.Type)
	require.Equal(t, "authentication_required", e.Error.Code)
	require.Contains(t, e.Error.Message, "requires authentication")
	require.Contains(t, e.Error.Message, "return_url")

	stored := s.chargesWithKey(key)
	require.Len(t, stored, 1)
	require.Equal(t, e.Error.Charge, stored[0].ID)
	require.Equal(t, "failed", stored[0].Status)
	require.Equal(t, "authentication_required", *stored[0].FailureCode)
	require.Nil(t, stored[0].NextAction)

	replay, again := s.mustPost(key, chargeBody(tokenAuthentication))
	require.Equal(t, http.StatusPaymentRequired, replay.StatusCode)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Equal(t, raw, again)
	require.Equal(t, 1, s.rowsWithKey(key))
}

func TestCreateCharge_AuthenticationRequiredWithReturnURL_WaitsWithRedirectNextAction(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	key := uniqueKey(t)
	resp, raw := s.mustPost(key, authenticationBody(shopReturnURL))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	c := decode[charge](t, raw)
	require.Regexp(t, `^ch_[A-Za-z0-9]{24}$`, c.ID)
	require.Equal(t, "requires_action", c.Status)
	require.Nil(t, c.FailureCode)
	require.Equal(t, shopReturnURL, *c.ReturnURL)
	fields := decode[map[string]json.RawMessage](t, raw)
	require.JSONEq(t, fmt.Sprintf(`{"type":"redirect_to_url","redirect_to_url":{"url":%q,"return_url":%q}}`,
		s.srv.URL+"/authenticate/"+c.ID, shopReturnURL), string(fields["next_action"]))
	require.Equal(t, "requires_action", s.storedStatus(c.ID))

	// GET and the list show the same charge, next_action included.
	require.Equal(t, c, s.charge(c.ID))
	require.Equal(t, []charge{c}, s.chargesWithKey(key))
}

func TestCreateCharge_OtherCardsWithReturnURL_IgnoreIt(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	body := chargeBody("pm_card_visa")
	body["return_url"] = shopReturnURL
	resp, raw := s.mustPost(uniqueKey(t), body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	c := decode[charge](t, raw)
	require.Equal(t, "succeeded", c.Status)
	require.Equal(t, shopReturnURL, *c.ReturnURL, "stored all the same")
	fields := decode[map[string]json.RawMessage](t, raw)
	require.JSONEq(t, "null", string(fields["next_action"]))
	require.JSONEq(t, "null", string(fields["cancellation_reason"]))

	body = chargeBody("pm_card_chargeDeclined")
	body["return_url"] = shopReturnURL
	resp, raw = s.mustPost(uniqueKey(t), body)
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, string(raw))
	require.Equal(t, "card_declined", decode[errorBody](t, raw).Error.Code)

	// Without one, the field is null.
	resp, raw = s.mustPost(uniqueKey(t), chargeBody("pm_card_visa"))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.JSONEq(t, "null", string(decode[map[string]json.RawMessage](t, raw)["return_url"]))
}

func TestCreateCharge_InvalidReturnURL_Returns400AndStoresNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	tests := []struct {
		name      string
		returnURL any
	}{
		{"empty", ""},
		{"relative", "/checkout/done"},
		{"no scheme", "shop.example/done"},
		{"ftp", "ftp://shop.example/done"},
		{"javascript", "javascript:alert(1)"},
		{"no host", "https:///done"},
		{"credentials", "https://user:secret@shop.example/done"},
		{"user only", "https://user@shop.example/done"},
		{"space", "https://shop.example/check out"},
		{"tab", "https://shop.example/\tdone"},
		{"newline", "https://shop.example/done\r\nSet-Cookie: x=1"},
		{"too long", "https://shop.example/" + strings.Repeat("a", 2049-len("https://shop.example/"))},
		{"number", 42},
		{"object", map[string]string{"url": shopReturnURL}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := uniqueKey(t)
			resp, raw := s.mustPost(key, withReturnURL(chargeBody(tokenAuthentication), tt.returnURL))
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
			e := decode[errorBody](t, raw)
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Equal(t, "return_url_invalid", e.Error.Code)
			require.Zero(t, s.rowsWithKey(key))
		})
	}

	t.Run("2048 characters and http are fine", func(t *testing.T) {
		t.Parallel()
		long := "http://shop.example/" + strings.Repeat("a", 2048-len("http://shop.example/"))
		resp, raw := s.mustPost(uniqueKey(t), authenticationBody(long))
		require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
		require.Equal(t, long, decode[charge](t, raw).NextAction.RedirectToURL.ReturnURL)
	})
}

// withReturnURL sets the body's return_url to v, of any JSON type.
func withReturnURL(body map[string]any, v any) map[string]any {
	body["return_url"] = v
	return body
}

func TestCreateCharge_SameKeyOtherReturnURL_Returns409(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	tests := []struct {
		name          string
		first, second map[string]any
	}{
		{"another return_url", authenticationBody(shopReturnURL), authenticationBody(shopReturnURL + "&x=1")},
		{"return_url dropped", authenticationBody(shopReturnURL), chargeBody(tokenAuthentication)},
		{"return_url added", chargeBody(tokenAuthentication), authenticationBody(shopReturnURL)},
		{"return_url added to a visa charge", chargeBody("pm_card_visa"), withReturnURL(chargeBody("pm_card_visa"), shopReturnURL)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := uniqueKey(t)
			resp, raw := s.mustPost(key, tt.first)
			require.NotEqual(t, http.StatusConflict, resp.StatusCode, string(raw))
			resp, raw = s.mustPost(key, tt.second)
			require.Equal(t, http.StatusConflict, resp.StatusCode, string(raw))
			require.Equal(t, "idempotency_key_reused", decode[errorBody](t, raw).Error.Code)
			require.Equal(t, 1, s.rowsWithKey(key))
		})
	}
}

func TestCreateCharge_ReplayOfWaitingCharge_AnswersTheChargeAsItIsNow(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	replay := func(t *testing.T, key string) (*http.Response, []byte) {
		t.Helper()
		resp, raw := s.mustPost(key, authenticationBody(shopReturnURL))
		require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
		require.Equal(t, 1, s.rowsWithKey(key), "a replay creates nothing")
		return resp, raw
	}

	t.Run("waiting, then completed", func(t *testing.T) {
		t.Parallel()
		key := uniqueKey(t)
		c := s.waitingCharge(key)
		resp, raw := replay(t, key)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
		require.Equal(t, c, decode[charge](t, raw), "still waiting, with the same next_action")

		resp, _ = s.press(c.ID, "complete")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		resp, raw = replay(t, key)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
		done := decode[charge](t, raw)
		require.Equal(t, c.ID, done.ID)
		require.Equal(t, "succeeded", done.Status)
		require.Nil(t, done.NextAction)
	})
	t.Run("failed", func(t *testing.T) {
		t.Parallel()
		key := uniqueKey(t)
		c := s.waitingCharge(key)
		resp, _ := s.press(c.ID, "fail")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		resp, raw := replay(t, key)
		require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, string(raw))
		e := decode[errorBody](t, raw)
		require.Equal(t, "card_error", e.Error.Type)
		require.Equal(t, "authentication_failed", e.Error.Code)
		require.Equal(t, c.ID, e.Error.Charge)
	})
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		key := uniqueKey(t)
		c := s.waitingCharge(key)
		resp, raw := s.cancel(c.ID, "abandoned")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
		resp, raw = replay(t, key)
		require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, string(raw))
		e := decode[errorBody](t, raw)
		require.Equal(t, "card_error", e.Error.Type)
		require.Equal(t, "authentication_abandoned", e.Error.Code)
		require.Equal(t, "The payment was cancelled: the shopper did not authenticate in time.", e.Error.Message)
		require.Equal(t, c.ID, e.Error.Charge)
	})
}

func TestChallengePage_WaitingCharge_ShowsAmountAndBothButtons(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	c := s.waitingCharge(uniqueKey(t))
	resp, html := s.send(http.MethodGet, c.NextAction.RedirectToURL.URL, "", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, html)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Contains(t, html, "<title>Authenticate your payment</title>")
	require.Contains(t, html, "3-D Secure challenge")
	require.Contains(t, html, "19.99 USD")
	require.Contains(t, html, "Order 42")
	require.Contains(t, html, ">Complete authentication</button>")
	require.Contains(t, html, ">Fail authentication</button>")
	require.Equal(t, s.srv.URL+"/authenticate/"+c.ID+"/complete", formAction(t, c.NextAction.RedirectToURL.URL, html, "complete"))
	require.Equal(t, s.srv.URL+"/authenticate/"+c.ID+"/fail", formAction(t, c.NextAction.RedirectToURL.URL, html, "fail"))
	for _, external := range []string{"<script", "src=", "<link", "@import", "url("} {
		require.NotContains(t, html, external, "the page is self-contained")
	}
}

func TestChallengePage_Complete_RedirectsToReturnURLAndTheChargeSucceeds(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	c := s.waitingCharge(uniqueKey(t))
	_, html := s.send(http.MethodGet, c.NextAction.RedirectToURL.URL, "", "", nil)
	resp, _ := s.send(http.MethodPost, formAction(t, c.NextAction.RedirectToURL.URL, html, "complete"),
		"application/x-www-form-urlencoded", "", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, shopReturnURL, resp.Header.Get("Location"), "verbatim, the shop's key included")

	done := s.charge(c.ID)
	require.Equal(t, "succeeded", done.Status)
	require.Nil(t, done.FailureCode)
	require.Nil(t, done.NextAction)
	require.Equal(t, "succeeded", s.storedStatus(c.ID))
}

func TestChallengePage_Fail_RedirectsToReturnURLAndTheChargeFailsAuthentication(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	c := s.waitingCharge(uniqueKey(t))
	_, html := s.send(http.MethodGet, c.NextAction.RedirectToURL.URL, "", "", nil)
	resp, _ := s.send(http.MethodPost, formAction(t, c.NextAction.RedirectToURL.URL, html, "fail"),
		"application/x-www-form-urlencoded", "", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, shopReturnURL, resp.Header.Get("Location"))

	failed := s.charge(c.ID)
	require.Equal(t, "failed", failed.Status)
	require.Equal(t, "authentication_failed", *failed.FailureCode)
	require.NotEmpty(t, *failed.FailureMessage)
	require.Nil(t, failed.NextAction)
}

func TestChallengePage_PressedAgainAfterTheEnd_ChangesNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	c := s.waitingCharge(uniqueKey(t))
	for _, button := range []string{"complete", "complete", "fail", "complete"} {
		resp, _ := s.press(c.ID, button)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, button)
		require.Equal(t, shopReturnURL, resp.Header.Get("Location"))
		require.Equal(t, "succeeded", s.charge(c.ID).Status, "after %s", button)
	}

	// A charge cancelled before the shopper came back stays cancelled too.
	canceled := s.waitingCharge(uniqueKey(t))
	resp, raw := s.cancel(canceled.ID, "abandoned")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	pressed, _ := s.press(canceled.ID, "complete")
	require.Equal(t, http.StatusSeeOther, pressed.StatusCode)
	require.Equal(t, shopReturnURL, pressed.Header.Get("Location"))
	require.Equal(t, "canceled", s.charge(canceled.ID).Status)
}

func TestChallengePage_ChargeThatNoLongerWaits_SaysHowItEndedAndLinksBack(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	tests := []struct {
		end  func(id string)
		want string
	}{
		{func(id string) { s.press(id, "complete") }, "it succeeded."},
		{func(id string) { s.press(id, "fail") }, "it failed. The shopper failed the card&#39;s authentication"},
		{func(id string) { s.cancel(id, "abandoned") }, "it was cancelled. The payment was cancelled: the shopper did not authenticate in time."},
	}
	for _, tt := range tests {
		c := s.waitingCharge(uniqueKey(t))
		tt.end(c.ID)
		resp, html := s.page(c.ID)
		require.Equal(t, http.StatusOK, resp.StatusCode, html)
		require.Contains(t, html, "no longer waits for authentication: "+tt.want)
		require.NotContains(t, html, "<form")
		require.Contains(t, html, `<a href="https://shop.example/checkout/done?chargeonce_key=client-1&amp;lang=en">`)
	}

	// A charge that never waited has nowhere to link back to.
	resp, raw := s.mustPost(uniqueKey(t), chargeBody("pm_card_visa"))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	page, html := s.page(decode[charge](t, raw).ID)
	require.Equal(t, http.StatusOK, page.StatusCode, html)
	require.Contains(t, html, "it succeeded.")
	require.NotContains(t, html, "<a ")
	pressed, html := s.press(decode[charge](t, raw).ID, "fail")
	require.Equal(t, http.StatusConflict, pressed.StatusCode, html)
	require.Equal(t, "succeeded", s.charge(decode[charge](t, raw).ID).Status)
}

func TestChallengePage_UnknownCharge_Returns404(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	resp, html := s.page("ch_doesNotExist")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, html)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, html, "No such payment")
	for _, button := range []string{"complete", "fail"} {
		resp, html = s.press("ch_doesNotExist", button)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, html)
	}
	// The id is escaped, not echoed as markup.
	resp, html = s.page(url.PathEscape(`<b>x</b>`))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.NotContains(t, html, "<b>")
}

func TestChallengePage_PostFromAnotherSite_RefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	c := s.waitingCharge(uniqueKey(t))
	for _, header := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Origin": {"https://evil.example"}},
	} {
		resp, body := s.send(http.MethodPost, s.srv.URL+"/authenticate/"+c.ID+"/complete", "application/x-www-form-urlencoded", "", header)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	}
	require.Equal(t, "requires_action", s.storedStatus(c.ID))

	// The page's own form, as a browser posts it, is same-origin.
	resp, _ := s.send(http.MethodPost, s.srv.URL+"/authenticate/"+c.ID+"/complete", "application/x-www-form-urlencoded", "",
		http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {s.srv.URL}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "succeeded", s.storedStatus(c.ID))
}

func TestChallenge_MountedUnderProviderPrefix_NextActionAndFormsWork(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t, cardsimtest.Schema)
	// As chargeonce's server mounts it.
	mux := http.NewServeMux()
	mux.Handle("/provider/", http.StripPrefix("/provider", cardsim.NewHandler(pool, cardsim.Config{})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s := &sim{t: t, srv: srv, pool: pool}

	resp, raw := s.send(http.MethodPost, srv.URL+"/provider/v1/charges", "application/json",
		mustJSON(t, authenticationBody(shopReturnURL)), http.Header{"Idempotency-Key": {uniqueKey(t)}})
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)
	c := decode[charge](t, []byte(raw))
	challenge := srv.URL + "/provider/authenticate/" + c.ID
	require.Equal(t, challenge, c.NextAction.RedirectToURL.URL)

	// The list, as the adapter's FindCharges reads it, names the same page.
	resp, raw = s.send(http.MethodGet, srv.URL+"/provider/v1/charges?idempotency_key="+url.QueryEscape(c.IdempotencyKey), "", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)
	require.Equal(t, challenge, decode[list](t, []byte(raw)).Data[0].NextAction.RedirectToURL.URL)

	page, html := s.send(http.MethodGet, challenge, "", "", nil)
	require.Equal(t, http.StatusOK, page.StatusCode, html)
	action := formAction(t, challenge, html, "complete")
	require.Equal(t, challenge+"/complete", action)
	resp, _ = s.send(http.MethodPost, action, "application/x-www-form-urlencoded", "", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, shopReturnURL, resp.Header.Get("Location"))
	require.Equal(t, "succeeded", s.storedStatus(c.ID))
}

func TestCreateCharge_PublicURLConfigured_NamesTheChallengePageThere(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{PublicURL: "https://pay.example/provider/"})
	c := s.waitingCharge(uniqueKey(t))
	require.Equal(t, "https://pay.example/provider/authenticate/"+c.ID, c.NextAction.RedirectToURL.URL)
	require.Equal(t, c.NextAction, s.charge(c.ID).NextAction)
}

func TestCancelCharge_Waiting_Returns200Canceled(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	tests := []struct {
		name        string
		contentType string
		body        string
		reason      *string
		message     string
	}{
		{"form, abandoned", "application/x-www-form-urlencoded", "cancellation_reason=abandoned", ptr("abandoned"),
			"The payment was cancelled: the shopper did not authenticate in time."},
		{"JSON, abandoned", "application/json", `{"cancellation_reason":"abandoned"}`, ptr("abandoned"),
			"The payment was cancelled: the shopper did not authenticate in time."},
		{"JSON, requested by customer", "application/json; charset=utf-8", `{"cancellation_reason":"requested_by_customer"}`,
			ptr("requested_by_customer"), "The payment was cancelled before the shopper authenticated (requested_by_customer)."},
		{"no body", "", "", nil, "The payment was cancelled before the shopper authenticated."},
		{"empty JSON object", "application/json", `{}`, nil, "The payment was cancelled before the shopper authenticated."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := uniqueKey(t)
			c := s.waitingCharge(key)
			resp, raw := s.send(http.MethodPost, s.srv.URL+"/v1/charges/"+c.ID+"/cancel", tt.contentType, tt.body, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, raw)
			got := decode[charge](t, []byte(raw))
			require.Equal(t, c.ID, got.ID)
			require.Equal(t, "canceled", got.Status)
			require.Equal(t, "authentication_abandoned", *got.FailureCode)
			require.Equal(t, tt.message, *got.FailureMessage)
			require.Equal(t, tt.reason, got.CancellationReason)
			require.Nil(t, got.NextAction)
			require.Equal(t, shopReturnURL, *got.ReturnURL)

			require.Equal(t, got, s.charge(c.ID))
			require.Equal(t, []charge{got}, s.chargesWithKey(key))
		})
	}
}

func TestCancelCharge_NotWaiting_Returns400ChargeUnexpectedState(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	succeeded := s.waitingCharge(uniqueKey(t))
	s.press(succeeded.ID, "complete")
	failed := s.waitingCharge(uniqueKey(t))
	s.press(failed.ID, "fail")
	canceled := s.waitingCharge(uniqueKey(t))
	resp, raw := s.cancel(canceled.ID, "abandoned")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	resp, raw = s.mustPost(uniqueKey(t), chargeBody("pm_card_visa"))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	neverWaited := decode[charge](t, raw)

	for _, tt := range []struct {
		id, status string
	}{
		{succeeded.ID, "succeeded"}, {failed.ID, "failed"}, {canceled.ID, "canceled"}, {neverWaited.ID, "succeeded"},
	} {
		before := s.charge(tt.id)
		resp, raw := s.cancel(tt.id, "abandoned")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
		e := decode[errorBody](t, raw)
		require.Equal(t, "invalid_request_error", e.Error.Type)
		require.Equal(t, "charge_unexpected_state", e.Error.Code)
		require.Equal(t, tt.id, e.Error.Charge)
		require.Contains(t, e.Error.Message, "status is "+tt.status)
		require.Equal(t, before, s.charge(tt.id), "a refused cancel changes nothing")
	}
}

func TestCancelCharge_UnknownCharge_Returns404(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	resp, raw := s.cancel("ch_doesNotExist", "abandoned")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(raw))
	e := decode[errorBody](t, raw)
	require.Equal(t, "invalid_request_error", e.Error.Type)
	require.Equal(t, "resource_missing", e.Error.Code)
}

func TestCancelCharge_InvalidBody_Returns400AndChangesNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	tests := []struct {
		name, contentType, body, code string
	}{
		{"unknown reason", "application/x-www-form-urlencoded", "cancellation_reason=bored", "cancellation_reason_invalid"},
		{"unknown reason in JSON", "application/json", `{"cancellation_reason":"bored"}`, "cancellation_reason_invalid"},
		{"reason as number", "application/json", `{"cancellation_reason":7}`, "cancellation_reason_invalid"},
		{"not JSON", "application/json", `cancellation_reason=abandoned`, "body_invalid"},
		{"two JSON objects", "application/json", `{}{}`, "body_invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := s.waitingCharge(uniqueKey(t))
			resp, raw := s.send(http.MethodPost, s.srv.URL+"/v1/charges/"+c.ID+"/cancel", tt.contentType, tt.body, nil)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, raw)
			require.Equal(t, tt.code, decode[errorBody](t, []byte(raw)).Error.Code)
			require.Equal(t, "requires_action", s.storedStatus(c.ID))
		})
	}
}

// TestAuthentication_CompleteRacesCancel_ExactlyOneWins: the shopper presses
// Complete as chargeonce gives up on them. Whichever wins, the charge ends in
// one final state, and the other call is answered as it lost: a complete
// that lost still sends the shopper back (303) and changes nothing; a cancel
// that lost is refused with charge_unexpected_state.
func TestAuthentication_CompleteRacesCancel_ExactlyOneWins(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	const rounds = 200
	wins := map[string]int{}
	for i := range rounds {
		c := s.waitingCharge(fmt.Sprintf("%s-%d", uniqueKey(t), i))
		var completed, canceled *http.Response
		var cancelBody []byte
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			completed, _ = s.press(c.ID, "complete")
		})
		wg.Go(func() {
			<-start
			canceled, cancelBody = s.cancel(c.ID, "abandoned")
		})
		close(start)
		wg.Wait()

		status := s.storedStatus(c.ID)
		wins[status]++
		require.Equal(t, http.StatusSeeOther, completed.StatusCode, "round %d: the shopper goes back whoever won", i)
		require.Equal(t, shopReturnURL, completed.Header.Get("Location"))
		got := s.charge(c.ID)
		switch status {
		case "succeeded":
			require.Equal(t, http.StatusBadRequest, canceled.StatusCode, "round %d: %s", i, cancelBody)
			require.Equal(t, "charge_unexpected_state", decode[errorBody](t, cancelBody).Error.Code)
			require.Nil(t, got.FailureCode)
			require.Nil(t, got.CancellationReason)
		case "canceled":
			require.Equal(t, http.StatusOK, canceled.StatusCode, "round %d: %s", i, cancelBody)
			require.Equal(t, "canceled", decode[charge](t, cancelBody).Status)
			require.Equal(t, "authentication_abandoned", *got.FailureCode)
		default:
			require.Failf(t, "no single final state", "round %d: status %q", i, status)
		}
	}
	t.Logf("of %d races, %v", rounds, wins)
}

func ptr[T any](v T) *T { return &v }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}
