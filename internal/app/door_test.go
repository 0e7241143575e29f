package app

import (
	"context"
	"encoding/json"
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

// ClientBoundTo is an HTTP client whose connections leave from ip, a
// loopback address of 127.0.0.0/8: one client address among many, as the
// server sees it.
func ClientBoundTo(t *testing.T, ip string) *http.Client {
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

// SendAs makes one request to s with the Host header host (what a browser
// sends for the name it resolved), over a real connection to s's address.
func (s *Server) SendAs(t *testing.T, host, method, path string, headers http.Header, body string) RawResponse {
	t.Helper()
	h := headers.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Host", host)
	return s.Send(t, method, path, h, strings.NewReader(body))
}

// requireMisdirected requires the server's refusal of a host name it does
// not answer for: 421, a short typed JSON error that does not echo the name.
func requireMisdirected(t *testing.T, r RawResponse, what string) {
	t.Helper()
	require.Equal(t, http.StatusMisdirectedRequest, r.Status, "%s: %s", what, r.Body)
	require.Less(t, len(r.Body), 600, what)
	out, err := r.TryGQL()
	require.NoError(t, err, what)
	require.Equal(t, "BAD_REQUEST", OnlyCode(t, out.Errors), what)
	require.Equal(t, "Host", out.Errors[0].Extensions["field"], what)
	require.NotContains(t, string(r.Body), "attacker", what)
}

// TestDevelopment_ForeignHost_IsRefusedBeforeAnyHandler: a page of
// rebind.attacker.example whose name now resolves to 127.0.0.1 reaches the
// development server with its own name as Host (DNS rebinding). Every
// route refuses it before anything runs: no charge with the demo key, no
// refund by the demo backend, no simulator, no playground holding the demo
// key. The server's own names are served, with or without a port.
func TestDevelopment_ForeignHost_IsRefusedBeforeAnyHandler(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := ListenOn(t, dbURL, nil)
	charged := s.ChargeCard(t, DemoAPIKeyDefault, NewKey(), Visa(500))
	require.Equal(t, "SUCCEEDED", charged.Data.ChargeCard.Status)
	charge := charged.Data.ChargeCard.Charge
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	require.NoError(t, err)

	key := NewKey()
	chargeBody := `{"query":` + strconvQuote(ChargeCardMutation) + `,"variables":{"key":"` + key + `","input":{"amount":100,"currency":"USD","paymentMethod":"pm_card_visa"}}}`
	refundBody := demoRefundBody(t, map[string]any{"refundId": "rebound", "chargeId": charge.Id})
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:" + port, "attacker.example.", "127.0.0.1.attacker.example:" + port} {
		requireMisdirected(t, s.SendAs(t, host, http.MethodPost, "/graphql", JSONHeaders("Authorization", "Bearer "+DemoAPIKeyDefault), chargeBody), host+" /graphql")
		requireMisdirected(t, s.SendAs(t, host, http.MethodPost, "/demo/refund", JSONHeaders(), refundBody), host+" /demo/refund")
		requireMisdirected(t, s.SendAs(t, host, http.MethodPost, "/demo/checkout-session", JSONHeaders(),
			`{"cartId":"rebound","amount":100,"currency":"USD"}`), host+" /demo/checkout-session")
		requireMisdirected(t, s.SendAs(t, host, http.MethodGet, "/provider/v1/charges?merchant=demo", nil, ""), host+" /provider/")
		playground := s.SendAs(t, host, http.MethodGet, "/playground", nil, "")
		requireMisdirected(t, playground, host+" /playground")
		require.NotContains(t, string(playground.Body), DemoAPIKeyDefault)
		requireMisdirected(t, s.SendAs(t, host, http.MethodGet, "/", nil, ""), host+" /")
		requireMisdirected(t, s.SendAs(t, host, http.MethodGet, "/metrics", nil, ""), host+" /metrics")
	}
	require.Empty(t, s.ProviderCharges(t, "demo", key), "no charge")
	require.Empty(t, s.ProviderRefunds(t, charge.ProviderChargeId), "no refund")
	require.Zero(t, CountRows(t, dbtest.Open(t, dbURL), "SELECT count(*)::int FROM checkout_sessions"), "no session")

	// The probes answer for any name: load balancers probe by address.
	require.Equal(t, http.StatusOK, s.SendAs(t, "rebind.attacker.example", http.MethodGet, "/healthz", nil, "").Status)
	require.Equal(t, http.StatusOK, s.SendAs(t, "10.1.2.3:"+port, http.MethodGet, "/readyz", nil, "").Status)

	// Its own names: localhost and any loopback address, with or without a port.
	for _, host := range []string{"localhost", "localhost:" + port, "LocalHost:" + port, "127.0.0.1:" + port, "127.0.0.5", "127.0.0.5:" + port,
		"[::1]:" + port, "[::1]"} {
		r := s.SendAs(t, host, http.MethodPost, "/graphql", JSONHeaders("Authorization", "Bearer "+DemoAPIKeyDefault), chargeBody)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", host, r.Body)
		require.Equal(t, http.StatusOK, s.SendAs(t, host, http.MethodGet, "/playground", nil, "").Status, host)
	}
	require.Len(t, s.ProviderCharges(t, "demo", key), 1, "the key charged once, under the server's own names")
	require.NotContains(t, s.LogText(), "HOST listens beyond this machine", "on loopback, nothing to say")
	require.Contains(t, s.LogText(), "refused a request for a host name this server does not answer for")
}

func strconvQuote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestAllowedHosts_NamesTheOperatorConfigures: ALLOWED_HOSTS adds names a
// development server answers for (one reached from another machine); in
// production, set, it is enforced too, and unset, any name is served (the
// proxy in front decides which names reach the server).
func TestAllowedHosts_NamesTheOperatorConfigures(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	dev := ListenOn(t, dbURL, map[string]string{"ALLOWED_HOSTS": "devbox.lan, Shop.Test", "HOST": "0.0.0.0"})
	require.Contains(t, dev.LogText(), "name in ALLOWED_HOSTS (comma-separated) the names other machines reach it by",
		"HOST beyond loopback: the log says who may reach it")
	for _, host := range []string{"devbox.lan", "devbox.lan:8080", "shop.test", "SHOP.TEST:443", "localhost"} {
		require.Equal(t, http.StatusOK, dev.SendAs(t, host, http.MethodGet, "/playground", nil, "").Status, host)
	}
	requireMisdirected(t, dev.SendAs(t, "rebind.attacker.example", http.MethodGet, "/playground", nil, ""), "an unnamed host")
	requireMisdirected(t, dev.SendAs(t, "evil.devbox.lan", http.MethodGet, "/playground", nil, ""), "a name under an allowed one")

	prodEnv := func(allowed string) map[string]string {
		return stripefake.Start(t).Env(map[string]string{"APP_ENV": "production", "ALLOWED_HOSTS": allowed})
	}
	anyHost := ListenOn(t, dbURL, prodEnv(""))
	require.Contains(t, anyHost.LogText(), "ALLOWED_HOSTS is not set: any host name is served")
	r := anyHost.SendAs(t, "api.shop.example", http.MethodPost, "/graphql", JSONHeaders(), `{"query":"{__typename}"}`)
	require.Equal(t, http.StatusOK, r.Status, "served: %s", r.Body)
	named := ListenOn(t, dbURL, prodEnv("api.shop.example"))
	r = named.SendAs(t, "api.shop.example:443", http.MethodPost, "/graphql", JSONHeaders(), `{"query":"{__typename}"}`)
	require.Equal(t, http.StatusOK, r.Status, "served: %s", r.Body)
	requireMisdirected(t, named.SendAs(t, "rebind.attacker.example", http.MethodPost, "/graphql", JSONHeaders(), `{"query":"{__typename}"}`), "production, set")
	require.Equal(t, http.StatusOK, named.SendAs(t, "10.1.2.3:8080", http.MethodGet, "/readyz", nil, "").Status, "probes by address")
}

// TestDemoBackend_CrossSiteOrNotJSON_RefusedAndRefundsNothing: the demo's
// shop backend spends the demo merchant's secret key, so it takes only a
// JSON POST from its own pages. A cross-site form (text/plain, form-encoded,
// multipart: what a form can send without a preflight) is 415, and a JSON
// POST from another origin or marked cross-site by the browser is 403;
// nothing is refunded or created. The demo page's own request still works.
func TestDemoBackend_CrossSiteOrNotJSON_RefusedAndRefundsNothing(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := StartOn(t, dbURL, nil)
	charged := s.ChargeCard(t, DemoAPIKeyDefault, NewKey(), Visa(700))
	require.Equal(t, "SUCCEEDED", charged.Data.ChargeCard.Status)
	charge := charged.Data.ChargeCard.Charge
	refund := demoRefundBody(t, map[string]any{"refundId": "cross-site", "chargeId": charge.Id})
	session := `{"cartId":"cross-site","amount":100,"currency":"USD"}`

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
		{"JSON from another origin", JSONHeaders("Origin", "https://attacker.example"), http.StatusForbidden, "FORBIDDEN"},
		{"JSON from an opaque origin", JSONHeaders("Origin", "null"), http.StatusForbidden, "FORBIDDEN"},
		{"JSON marked cross-site", JSONHeaders("Sec-Fetch-Site", "cross-site"), http.StatusForbidden, "FORBIDDEN"},
		{"JSON from another port of this host", JSONHeaders("Origin", s.URL+":8443"), http.StatusForbidden, "FORBIDDEN"},
	} {
		for path, body := range map[string]string{"/demo/refund": refund, "/demo/checkout-session": session} {
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
	require.Zero(t, CountRows(t, dbtest.Open(t, dbURL), "SELECT count(*)::int FROM checkout_sessions"), "no session")

	// The demo page's own request: JSON, from its own origin.
	status, v := s.demoShop(t, "/demo/refund", refund, "Origin", s.URL, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusOK, status, "%v", v)
	require.Len(t, s.ProviderRefunds(t, charge.ProviderChargeId), 1)
}
