package app_test

import (
	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/internal/app"
	"chargeonce/provider/stripe/stripefake"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireMisdirected requires the server's refusal of a host name it does
// not answer for: 421, a short typed JSON error that does not echo the name.
func requireMisdirected(t *testing.T, r apitest.RawResponse, what string) {
	t.Helper()
	require.Equal(t, http.StatusMisdirectedRequest, r.Status, "%s: %s", what, r.Body)
	require.Less(t, len(r.Body), 600, what)
	out, err := r.TryGQL()
	require.NoError(t, err, what)
	require.Equal(t, "BAD_REQUEST", apitest.OnlyCode(t, out.Errors), what)
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
	s := apitest.ListenOn(t, dbURL, nil)
	charged := s.ChargeCard(t, app.DemoAPIKeyDefault, apitest.NewKey(), apitest.Visa(500))
	require.Equal(t, "SUCCEEDED", charged.Data.ChargeCard.Status)
	charge := charged.Data.ChargeCard.Charge
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	require.NoError(t, err)

	key := apitest.NewKey()
	chargeBody := `{"query":` + strconvQuote(apitest.ChargeCardMutation) + `,"variables":{"key":"` + key + `","input":{"amount":100,"currency":"USD","paymentMethod":"pm_card_visa"}}}`
	refundBody := demoBody(t, map[string]any{"refundId": "rebound", "chargeId": charge.Id})
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:" + port, "attacker.example.", "127.0.0.1.attacker.example:" + port} {
		requireMisdirected(t, s.SendAs(t, host, http.MethodPost, "/graphql", apitest.JSONHeaders("Authorization", "Bearer "+app.DemoAPIKeyDefault), chargeBody), host+" /graphql")
		requireMisdirected(t, s.SendAs(t, host, http.MethodPost, "/demo/refund", apitest.JSONHeaders(), refundBody), host+" /demo/refund")
		requireMisdirected(t, s.SendAs(t, host, http.MethodPost, "/demo/checkout-session", apitest.JSONHeaders(),
			`{"cartId":"rebound","amount":100,"currency":"USD"}`), host+" /demo/checkout-session")
		requireMisdirected(t, s.SendAs(t, host, http.MethodGet, "/provider/v1/charges?merchant=demo", nil, ""), host+" /provider/")
		playground := s.SendAs(t, host, http.MethodGet, "/playground", nil, "")
		requireMisdirected(t, playground, host+" /playground")
		require.NotContains(t, string(playground.Body), app.DemoAPIKeyDefault)
		requireMisdirected(t, s.SendAs(t, host, http.MethodGet, "/", nil, ""), host+" /")
		requireMisdirected(t, s.SendAs(t, host, http.MethodGet, "/metrics", nil, ""), host+" /metrics")
	}
	require.Empty(t, s.ProviderCharges(t, "demo", key), "no charge")
	require.Empty(t, s.ProviderRefunds(t, charge.ProviderChargeId), "no refund")
	require.Zero(t, apitest.CountRows(t, dbtest.Open(t, dbURL), "SELECT count(*)::int FROM checkout_sessions"), "no session")

	// The probes answer for any name: load balancers probe by address.
	require.Equal(t, http.StatusOK, s.SendAs(t, "rebind.attacker.example", http.MethodGet, "/healthz", nil, "").Status)
	require.Equal(t, http.StatusOK, s.SendAs(t, "10.1.2.3:"+port, http.MethodGet, "/readyz", nil, "").Status)

	// Its own names: localhost and any loopback address, with or without a port.
	for _, host := range []string{"localhost", "localhost:" + port, "LocalHost:" + port, "127.0.0.1:" + port, "127.0.0.5", "127.0.0.5:" + port,
		"[::1]:" + port, "[::1]"} {
		r := s.SendAs(t, host, http.MethodPost, "/graphql", apitest.JSONHeaders("Authorization", "Bearer "+app.DemoAPIKeyDefault), chargeBody)
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
	dev := apitest.ListenOn(t, dbURL, map[string]string{"ALLOWED_HOSTS": "devbox.lan, Shop.Test", "HOST": "0.0.0.0"})
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
	anyHost := apitest.ListenOn(t, dbURL, prodEnv(""))
	require.Contains(t, anyHost.LogText(), "ALLOWED_HOSTS is not set: any host name is served")
	r := anyHost.SendAs(t, "api.shop.example", http.MethodPost, "/graphql", apitest.JSONHeaders(), `{"query":"{__typename}"}`)
	require.Equal(t, http.StatusOK, r.Status, "served: %s", r.Body)
	named := apitest.ListenOn(t, dbURL, prodEnv("api.shop.example"))
	r = named.SendAs(t, "api.shop.example:443", http.MethodPost, "/graphql", apitest.JSONHeaders(), `{"query":"{__typename}"}`)
	require.Equal(t, http.StatusOK, r.Status, "served: %s", r.Body)
	requireMisdirected(t, named.SendAs(t, "rebind.attacker.example", http.MethodPost, "/graphql", apitest.JSONHeaders(), `{"query":"{__typename}"}`), "production, set")
	require.Equal(t, http.StatusOK, named.SendAs(t, "10.1.2.3:8080", http.MethodGet, "/readyz", nil, "").Status, "probes by address")
}
