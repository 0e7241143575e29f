package apitest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/graph/graphtest"
	"chargeonce/merchant"
	"chargeonce/payment"
	"chargeonce/provider/stripe/stripefake"
)

// The rest of the public door, tried as a stranger or a careless operator
// would: plain http in production (returnUrls and origins), and the
// development server reached under a foreign host name (DNS rebinding) or
// by a cross-site form (internal/app's host and demo tests). The Stripe
// webhook endpoint's door is tried in provider/stripe's apiwebhook_test.go.

// productionShop is a production server and its database, with a merchant
// "shop" whose secret and publishable keys it returns. The shop registered
// https://shop.example, and http://127.0.0.1:5173 before production refused
// plain http (or from a development command on the same database).
func productionShop(t *testing.T, listening bool) (s *Server, pool *pgxpool.Pool, secretKey, publishable string) {
	t.Helper()
	dbURL := dbtest.NewDatabase(t)
	pool = dbtest.Open(t, dbURL)
	merchants := merchant.New(pool, false)
	_, secretKey, err := merchants.CreateAPIKey(context.Background(), "shop", merchant.KeySecret)
	require.NoError(t, err)
	_, publishable, err = merchants.CreateAPIKey(context.Background(), "shop", merchant.KeyPublishable)
	require.NoError(t, err)
	for _, origin := range []string{"https://shop.example", "http://127.0.0.1:5173"} {
		_, _, err := merchants.AddOrigin(context.Background(), "shop", origin)
		require.NoError(t, err)
	}
	env := stripefake.Start(t).Env(map[string]string{"APP_ENV": "production"})
	if listening {
		return ListenOn(t, dbURL, env), pool, secretKey, publishable
	}
	return StartOn(t, dbURL, env), pool, secretKey, publishable
}

// TestProduction_PlainHTTPReturnURLs_AreRefused: in production a returnUrl
// must be https, loopback included: chargeCard with a secret key and
// createCheckoutSession refuse plain http with BAD_USER_INPUT naming the
// field, and claim or create nothing. (Development keeps plain http on
// loopback: TestAuthentication_SecretKey_ReturnURLRules.)
func TestProduction_PlainHTTPReturnURLs_AreRefused(t *testing.T) {
	t.Parallel()
	s, pool, secretKey, _ := productionShop(t, false)
	for _, plain := range []string{"http://127.0.0.1:5173/return", "http://localhost/return", "http://[::1]:8080/return", "http://127.0.0.5/return"} {
		in := WithPaymentMethod("pm_card_authenticationRequired")
		in.ReturnUrl = &plain
		key := NewKey()
		r := s.ChargeCard(t, secretKey, key, in)
		require.Equal(t, "BAD_USER_INPUT", r.Code(t), plain)
		require.Equal(t, "input.returnUrl", r.Errors[0].Extensions["field"], plain)
		require.Contains(t, r.Errors[0].Message, "https", plain)
		require.Zero(t, AttemptsOf(t, pool, key), "nothing claimed")

		created := s.CreateSession(t, secretKey, NewKey(), SessionInput(500, "returnUrl", plain))
		require.Equal(t, "BAD_USER_INPUT", created.Code(t), plain)
		require.Equal(t, "input.returnUrl", created.Errors[0].Extensions["field"], plain)
	}
	require.Zero(t, CountRows(t, pool, "SELECT count(*)::int FROM checkout_sessions"), "no session created")

	created := s.CreateSession(t, secretKey, NewKey(), SessionInput(500, "returnUrl", "https://shop.example/return"))
	require.Empty(t, created.Errors, "https on a registered origin")
}

// TestProduction_PlainHTTPOrigins_RefusedAndNotServed: production refuses
// to register an http:// origin, and one registered before is served no
// CORS: its preflight, its requests and its websockets are refused like an
// unregistered origin's, while the https origin beside it is served.
func TestProduction_PlainHTTPOrigins_RefusedAndNotServed(t *testing.T) {
	t.Parallel()
	s, pool, secretKey, publishable := productionShop(t, true)
	const plain, secure = "http://127.0.0.1:5173", "https://shop.example"

	_, _, err := merchant.NewWithConfig(pool, false, merchant.Config{Production: true}).AddOrigin(context.Background(), "shop", "http://127.0.0.1:5174")
	require.ErrorContains(t, err, "https")
	require.Equal(t, payment.EINVALID, payment.ErrorCode(err))
	require.Equal(t, 2, CountRows(t, pool, "SELECT count(*)::int FROM merchant_origins"), "nothing added")

	preflight := func(origin string) RawResponse {
		return s.Send(t, http.MethodOptions, "/graphql", http.Header{"Origin": {origin}, "Access-Control-Request-Method": {"POST"}}, nil)
	}
	require.Equal(t, http.StatusNoContent, preflight(secure).Status)
	refused := preflight(plain)
	require.Equal(t, http.StatusForbidden, refused.Status)
	require.Empty(t, refused.Header.Get("Access-Control-Allow-Origin"))

	created := s.CreateSession(t, secretKey, NewKey(), SessionInput(500))
	require.Empty(t, created.Errors)
	key := NewKey()
	var r Response
	raw := s.Post(t, publishable, http.Header{"Origin": {plain}}, ChargeCardMutation,
		map[string]any{"key": key, "input": map[string]any{"paymentMethod": "pm_card_visa", "checkoutSession": *created.Data.Create.Session.ClientSecret}}, &r)
	require.Equal(t, http.StatusForbidden, raw.Status)
	require.Equal(t, "FORBIDDEN", r.Code(t))
	require.Empty(t, raw.Header.Get("Access-Control-Allow-Origin"))
	require.Zero(t, AttemptsOf(t, pool, key), "nothing claimed")

	ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
	defer cancel()
	_, dial, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Origin": {plain}},
	})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, dial.StatusCode)
	graphtest.DialWS(t, s.URL, http.Header{"Origin": {secure}}) // the https origin's socket opens
}
