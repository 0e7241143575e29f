package graph_test

import (
	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/merchant"
	"chargeonce/provider/stripe/stripefake"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCORS_RegisteredOriginsAndPublishableKeysOnly(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.StartOn(t, dbURL, nil)
	merchants := merchant.New(dbtest.Open(t, dbURL), false)
	const shop = "https://shop.example"
	origin, added, err := merchants.AddOrigin(context.Background(), "demo", "HTTPS://Shop.Example:443")
	require.NoError(t, err)
	require.True(t, added)
	require.Equal(t, shop, origin, "stored as a browser sends it")
	_, secret := s.OpenSession(t, apitest.SessionInput(1234))

	preflight := func(origin string) apitest.RawResponse {
		return s.Send(t, http.MethodOptions, "/graphql", http.Header{
			"Origin": {origin}, "Access-Control-Request-Method": {"POST"},
			"Access-Control-Request-Headers": {"authorization, content-type, idempotency-key, traceparent, tracestate"},
		}, nil)
	}
	ok := preflight(shop)
	require.Equal(t, http.StatusNoContent, ok.Status)
	require.Equal(t, shop, ok.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, ok.Header.Get("Access-Control-Allow-Methods"), "POST")
	// traceparent and tracestate: a checkout page's trace context (@chargeonce/client's traceparent option).
	for _, h := range []string{"Authorization", "Content-Type", "Idempotency-Key", "traceparent", "tracestate"} {
		require.Contains(t, ok.Header.Get("Access-Control-Allow-Headers"), h)
	}
	require.Empty(t, ok.Header.Get("Access-Control-Allow-Credentials"), "never credentials")
	require.Contains(t, ok.Header.Values("Vary"), "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")

	pay := func(apiKey, origin string) (apitest.RawResponse, apitest.Response) {
		var r apitest.Response
		raw := s.Post(t, apiKey, http.Header{"Origin": {origin}}, apitest.ChargeCardMutation,
			map[string]any{"key": apitest.NewKey(), "input": map[string]any{"paymentMethod": "pm_card_visa", "checkoutSession": secret}}, &r)
		return raw, r
	}
	raw, r := pay(apitest.PublishableKey, shop)
	require.Equal(t, http.StatusOK, raw.Status)
	require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status)
	require.Equal(t, shop, raw.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, raw.Header.Get("Access-Control-Expose-Headers"), "Retry-After")
	for _, h := range []string{"X-Request-Id", "X-Trace-Id", "traceresponse"} {
		require.Contains(t, raw.Header.Get("Access-Control-Expose-Headers"), h, "a page may read %s", h)
	}
	require.Empty(t, raw.Header.Get("Access-Control-Allow-Credentials"))

	noCORS := func(name string, r apitest.RawResponse) {
		t.Helper()
		for h := range r.Header {
			require.False(t, strings.HasPrefix(strings.ToLower(h), "access-control-allow"), "%s: %s", name, h)
		}
	}
	// Any other origin: refused, without CORS headers.
	for _, other := range []string{"https://evil.example", "http://shop.example", "https://shop.example:8443", "null"} {
		pre := preflight(other)
		require.Equal(t, http.StatusForbidden, pre.Status, other)
		noCORS("preflight from "+other, pre)
		raw, r := pay(apitest.PublishableKey, other)
		require.Equal(t, http.StatusForbidden, raw.Status, other)
		require.Equal(t, "FORBIDDEN", r.Code(t))
		noCORS("POST from "+other, raw)
	}
	// A secret key from a browser is refused, even from the registered
	// origin, without CORS headers; from its own origin (the playground, in
	// development) it runs.
	raw, r = pay("demo-key", shop)
	require.Equal(t, http.StatusForbidden, raw.Status)
	require.Equal(t, "a secret key must not be used from a browser; use a publishable key and a checkout session", r.Errors[0].Message)
	noCORS("secret key", raw)
	raw, r = pay("demo-key", s.URL)
	require.Equal(t, "CHECKOUT_SESSION_PAID", r.Code(t), "runs, and the session is paid")
	noCORS("secret key, same origin", raw)

	// Removed, the origin is refused again.
	_, err = merchants.RemoveOrigin(context.Background(), "demo", shop)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, preflight(shop).Status)
}

func TestProduction_SecretKeyWithAnOrigin_IsRefused(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	merchants := merchant.New(dbtest.Open(t, dbURL), false)
	_, secretKey, err := merchants.CreateAPIKey(context.Background(), "shop", merchant.KeySecret)
	require.NoError(t, err)
	_, pk, err := merchants.CreateAPIKey(context.Background(), "shop", merchant.KeyPublishable)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(pk, "co_pk_"), pk)
	s := apitest.StartOn(t, dbURL, stripefake.Start(t).Env(map[string]string{"APP_ENV": "production"}))

	var r apitest.Response
	raw := s.Post(t, secretKey, http.Header{"Origin": {"https://shop.example"}}, apitest.ChargeCardMutation,
		map[string]any{"key": apitest.NewKey(), "input": apitest.Visa(100)}, &r)
	require.Equal(t, http.StatusForbidden, raw.Status)
	require.Equal(t, "FORBIDDEN", r.Code(t))
	require.Equal(t, "a secret key must not be used from a browser; use a publishable key and a checkout session", r.Errors[0].Message)
	// Server to server, as before.
	require.Equal(t, "SUCCEEDED", s.ChargeCard(t, secretKey, apitest.NewKey(), apitest.Visa(100)).Data.ChargeCard.Status)
	// The development keys do not exist in production.
	require.Equal(t, "UNAUTHENTICATED", s.PaySession(t, apitest.NewKey(), "cs_x", "pm_card_visa", nil).Code(t))
}

// TestCORS_RefusalsAfterTheKeyAreReadable: a page on a registered origin
// must read its RATE_LIMITED and the wait it names, or it retries blind.
func TestCORS_RefusalsAfterTheKeyAreReadable(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.StartOn(t, dbURL, map[string]string{"RATE_LIMIT_PUBLISHABLE": "0.001", "RATE_LIMIT_PUBLISHABLE_BURST": "1"})
	const shop = "https://shop.example"
	_, _, err := merchant.New(dbtest.Open(t, dbURL), false).AddOrigin(context.Background(), "demo", shop)
	require.NoError(t, err)
	_, secret := s.OpenSession(t, apitest.SessionInput(700))
	pay := func() (apitest.RawResponse, apitest.Response) {
		var r apitest.Response
		raw := s.Post(t, apitest.PublishableKey, http.Header{"Origin": {shop}}, apitest.ChargeCardMutation,
			map[string]any{"key": apitest.NewKey(), "input": map[string]any{"paymentMethod": "pm_card_visa", "checkoutSession": secret}}, &r)
		return raw, r
	}
	raw, r := pay()
	require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status)
	raw, r = pay()
	require.Equal(t, http.StatusTooManyRequests, raw.Status)
	require.Equal(t, "RATE_LIMITED", r.Code(t))
	require.Equal(t, shop, raw.Header.Get("Access-Control-Allow-Origin"), "the page may read the refusal")
	require.Contains(t, raw.Header.Get("Access-Control-Expose-Headers"), "Retry-After")
	require.NotEmpty(t, raw.Header.Get("Retry-After"))
}

// TestCrossOrigin_UnregisteredOriginsGetNoAccess: a page on an origin no
// merchant registered can neither pass a preflight (needed for the
// Authorization header and a JSON body) nor read an answer, and a secret
// key gets no CORS headers from any origin; the cross-site forms a browser
// sends without a preflight are refused (the text/plain and form-encoded
// cases of apitest's TestHostileInput). Registered origins: the tests above.
func TestCrossOrigin_UnregisteredOriginsGetNoAccess(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	preflight := s.Send(t, "OPTIONS", "/graphql", http.Header{
		"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {"authorization, content-type"},
	}, nil)
	post := s.Send(t, "POST", "/graphql", apitest.JSONHeaders("Origin", "https://evil.example", "Authorization", "Bearer demo-key"),
		strings.NewReader(`{"query":"{ __typename }"}`))
	// The preflight is refused; so is the POST (a browser sends one that
	// needs no preflight), which a secret key sends from another origin.
	require.Equal(t, http.StatusForbidden, preflight.Status)
	require.Equal(t, "FORBIDDEN", preflight.GQL(t).Errors[0].Extensions["code"])
	require.Equal(t, http.StatusForbidden, post.Status)
	require.Equal(t, "FORBIDDEN", post.GQL(t).Errors[0].Extensions["code"])
	for name, r := range map[string]apitest.RawResponse{"preflight": preflight, "POST": post} {
		for h := range r.Header {
			require.False(t, strings.HasPrefix(strings.ToLower(h), "access-control-allow"), "%s: %s", name, h)
		}
	}
}
