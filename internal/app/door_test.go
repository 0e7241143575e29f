package app

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

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
// by a cross-site form. The Stripe webhook endpoint's door is tried in
// stripewebhook_test.go.

// clientBoundTo is an HTTP client whose connections leave from ip, a
// loopback address of 127.0.0.0/8: one client address among many, as the
// server sees it.
func clientBoundTo(t *testing.T, ip string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, addr)
	}}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Timeout: time.Minute, Transport: transport}
}

// productionShop is a production server and its database, with a merchant
// "shop" whose secret and publishable keys it returns. The shop registered
// https://shop.example, and http://127.0.0.1:5173 before production refused
// plain http (or from a development command on the same database).
func productionShop(t *testing.T, listening bool) (s *testServer, pool *pgxpool.Pool, secretKey, publishable string) {
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
		return startListening(t, dbURL, env), pool, secretKey, publishable
	}
	return startServer(t, dbURL, env), pool, secretKey, publishable
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
		in := withPaymentMethod("pm_card_authenticationRequired")
		in.ReturnUrl = &plain
		key := newKey()
		r := s.chargeCard(t, secretKey, key, in)
		require.Equal(t, "BAD_USER_INPUT", r.code(t), plain)
		require.Equal(t, "input.returnUrl", r.Errors[0].Extensions["field"], plain)
		require.Contains(t, r.Errors[0].Message, "https", plain)
		require.Zero(t, attemptsOf(t, pool, key), "nothing claimed")

		created := s.createSession(t, secretKey, newKey(), sessionInput(500, "returnUrl", plain))
		require.Equal(t, "BAD_USER_INPUT", created.code(t), plain)
		require.Equal(t, "input.returnUrl", created.Errors[0].Extensions["field"], plain)
	}
	require.Zero(t, countRows(t, pool, "SELECT count(*)::int FROM checkout_sessions"), "no session created")

	created := s.createSession(t, secretKey, newKey(), sessionInput(500, "returnUrl", "https://shop.example/return"))
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
	require.Equal(t, 2, countRows(t, pool, "SELECT count(*)::int FROM merchant_origins"), "nothing added")

	preflight := func(origin string) rawResponse {
		return s.send(t, http.MethodOptions, "/graphql", http.Header{"Origin": {origin}, "Access-Control-Request-Method": {"POST"}}, nil)
	}
	require.Equal(t, http.StatusNoContent, preflight(secure).status)
	refused := preflight(plain)
	require.Equal(t, http.StatusForbidden, refused.status)
	require.Empty(t, refused.header.Get("Access-Control-Allow-Origin"))

	created := s.createSession(t, secretKey, newKey(), sessionInput(500))
	require.Empty(t, created.Errors)
	key := newKey()
	var r gqlResponse
	raw := s.post(t, publishable, http.Header{"Origin": {plain}}, chargeCardMutation,
		map[string]any{"key": key, "input": map[string]any{"paymentMethod": "pm_card_visa", "checkoutSession": *created.Data.Create.Session.ClientSecret}}, &r)
	require.Equal(t, http.StatusForbidden, raw.status)
	require.Equal(t, "FORBIDDEN", r.code(t))
	require.Empty(t, raw.header.Get("Access-Control-Allow-Origin"))
	require.Zero(t, attemptsOf(t, pool, key), "nothing claimed")

	ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
	defer cancel()
	_, dial, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Origin": {plain}},
	})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, dial.StatusCode)
	graphtest.DialWS(t, s.URL, http.Header{"Origin": {secure}}) // the https origin's socket opens
}
