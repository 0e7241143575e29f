package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/webhook/webhooktest"
)

// fakeDNS resolves the names of a test, and nothing else.
func fakeDNS(names map[string][]string) LookupHost {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		list, ok := names[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		var addrs []netip.Addr
		for _, a := range list {
			addrs = append(addrs, netip.MustParseAddr(a))
		}
		return addrs, nil
	}
}

var testNames = map[string][]string{
	"hooks.example.com":          {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
	"internal.example.com":       {"10.0.0.5"},
	"mixed.example.com":          {"93.184.215.14", "127.0.0.1"},
	"metadata-alias.example.com": {"169.254.169.254"},
	"mapped.example.com":         {"::ffff:192.168.1.1"},
}

// TestEndpoints_Production_RefusesInternalAddresses: production refuses an
// endpoint on each kind of address the worker must never POST to, as a
// literal (IPv4-mapped and NAT64 forms included) or as a name resolving to
// one; WEBHOOK_ALLOW_PRIVATE_NETWORKS lets private networks in and nothing
// else; development takes them all, as before.
func TestEndpoints_Production_RefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.merchant(t, "acme")
	prod := NewEndpoints(b.pool, Config{Production: true, LookupHost: fakeDNS(testNames)})
	private := NewEndpoints(b.pool, Config{Production: true, AllowPrivateNetworks: true, LookupHost: fakeDNS(testNames)})
	dev := NewEndpoints(b.pool, Config{LookupHost: fakeDNS(testNames)})

	for url, tc := range map[string]struct {
		why         string
		privateOnly bool // accepted with WEBHOOK_ALLOW_PRIVATE_NETWORKS
	}{
		"https://127.0.0.1/hooks":                               {why: "127.0.0.1 is a loopback address"},
		"https://127.1.2.3:8443/hooks":                          {why: "127.1.2.3 is a loopback address"},
		"https://[::1]/hooks":                                   {why: "::1 is a loopback address"},
		"https://localhost/hooks":                               {why: "localhost is a loopback address"},
		"https://shop.localhost./hooks":                         {why: "shop.localhost is a loopback address"},
		"https://10.1.2.3/hooks":                                {why: "10.1.2.3 is a private address", privateOnly: true},
		"https://172.16.0.1/hooks":                              {why: "172.16.0.1 is a private address", privateOnly: true},
		"https://192.168.1.1/hooks":                             {why: "192.168.1.1 is a private address", privateOnly: true},
		"https://[fd12:3456::1]/hooks":                          {why: "fd12:3456::1 is a private address", privateOnly: true},
		"https://100.64.0.1/hooks":                              {why: "100.64.0.1 is a private address", privateOnly: true},
		"https://169.254.169.254/latest/meta-data/":             {why: "169.254.169.254 is a link-local address"},
		"https://169.254.1.1/hooks":                             {why: "169.254.1.1 is a link-local address"},
		"https://[fe80::1]/hooks":                               {why: "fe80::1 is a link-local address"},
		"https://[fd00:ec2::254]/latest/meta-data/":             {why: "fd00:ec2::254 is a cloud metadata service"},
		"https://100.100.100.200/latest/meta-data/":             {why: "100.100.100.200 is a cloud metadata service"},
		"https://metadata.google.internal/computeMetadata/v1/":  {why: "metadata.google.internal is a cloud metadata service"},
		"https://Metadata.Google.Internal./computeMetadata/v1/": {why: "metadata.google.internal is a cloud metadata service"},
		"https://0.0.0.0/hooks":                                 {why: "0.0.0.0 is an unspecified address"},
		"https://[::]/hooks":                                    {why: ":: is an unspecified address"},
		"https://224.0.0.1/hooks":                               {why: "224.0.0.1 is a multicast address"},
		"https://[ff02::1]/hooks":                               {why: "ff02::1 is a multicast address"},
		"https://[::ffff:127.0.0.1]/hooks":                      {why: "127.0.0.1 is a loopback address"},
		"https://[::ffff:169.254.169.254]/hooks":                {why: "169.254.169.254 is a link-local address"},
		"https://[::ffff:10.0.0.1]/hooks":                       {why: "10.0.0.1 is a private address", privateOnly: true},
		"https://[64:ff9b::a9fe:a9fe]/hooks":                    {why: "64:ff9b::a9fe:a9fe is a link-local address"},
		"https://internal.example.com/hooks":                    {why: "internal.example.com resolves to 10.0.0.5 is a private address", privateOnly: true},
		"https://mixed.example.com/hooks":                       {why: "mixed.example.com resolves to 127.0.0.1 is a loopback address"},
		"https://metadata-alias.example.com/latest/meta-data/":  {why: "metadata-alias.example.com resolves to 169.254.169.254 is a link-local address"},
		"https://mapped.example.com/hooks":                      {why: "mapped.example.com resolves to 192.168.1.1 is a private address", privateOnly: true},
	} {
		_, _, err := prod.Set(context.Background(), "acme", url)
		require.ErrorIs(t, err, ErrInvalidURL, url)
		require.ErrorContains(t, err, tc.why, url)
		require.ErrorContains(t, err, "APP_ENV=production", url)
		_, _, err = private.Set(context.Background(), "acme", url)
		if tc.privateOnly {
			require.NoError(t, err, "a private network, allowed: %s", url)
		} else {
			require.ErrorIs(t, err, ErrInvalidURL, "never, even with private networks allowed: %s", url)
		}
		_, _, err = dev.Set(context.Background(), "acme", strings.Replace(url, "https://", "http://", 1))
		require.NoError(t, err, "development: %s", url)
	}
	for _, url := range []string{"https://hooks.example.com/chargeonce", "https://93.184.215.14/hooks",
		"https://[2606:4700:4700::1111]/hooks", "https://unresolvable.example.com/hooks"} {
		_, _, err := prod.Set(context.Background(), "acme", url)
		require.NoError(t, err, "public, or not resolvable now (checked at every attempt): %s", url)
	}
}

// countingReceiver is a receiver that also counts the connections made to
// it: a refused address must not even be dialled.
type countingReceiver struct {
	*receiver
	conns atomic.Int32
}

func newCountingReceiver(t *testing.T) *countingReceiver {
	t.Helper()
	rc := &countingReceiver{receiver: &receiver{}}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.requests = append(rc.requests, request{at: time.Now(), method: r.Method, url: r.URL.RequestURI()})
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	rc.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			rc.conns.Add(1)
		}
	}
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

// TestDelivery_Production_NameRebindsToLoopback_RefusedAtDial: an endpoint
// whose name resolved to a public address when it was set resolves to
// 127.0.0.1 at delivery. The worker checks the address it dials, after
// resolution: each attempt is recorded as refused and never sent (the
// receiver sees no connection), retried, then given up like any failure.
// So is an endpoint named localhost, registered in development.
func TestDelivery_Production_NameRebindsToLoopback_RefusedAtDial(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rebinding, local := b.merchant(t, "rebinding"), b.merchant(t, "local")
	rc := newCountingReceiver(t)
	_, port, err := net.SplitHostPort(rc.Listener.Addr().String())
	require.NoError(t, err)

	// Set while the name resolved to a public address.
	atSet := fakeDNS(map[string][]string{"hooks.rebind.test": {"93.184.215.14"}})
	_, _, err = NewEndpoints(b.pool, Config{Production: true, LookupHost: atSet}).Set(context.Background(), "rebinding", "https://hooks.rebind.test:"+port+"/hooks")
	require.NoError(t, err)
	// Registered in development (or before production refused it).
	b.set(t, "local", "https://localhost:"+port+"/hooks")

	cfg := testConfig()
	cfg.Production, cfg.MaxAge = true, 2*time.Second
	cfg.LookupHost = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == "hooks.rebind.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // rebound
		}
		return lookupSystem(ctx, host) // localhost: the machine's own resolver
	}
	b.start(t, cfg)
	webhooktest.Publish(t, b.js, newEvent(rebinding))
	webhooktest.Publish(t, b.js, newEvent(local))
	waitFor(t, eventually, "both deliveries given up", func() bool {
		return b.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'failed'") == 2
	})
	for merchant, want := range map[string]string{
		"rebinding": "not sent: invalid webhook URL: hooks.rebind.test resolves to 127.0.0.1 is a loopback address, which is refused when APP_ENV=production",
		"local":     "not sent: invalid webhook URL: localhost is a loopback address, which is refused when APP_ENV=production",
	} {
		log := b.deliveries(t, merchant)
		require.GreaterOrEqual(t, len(log), 2, "%s: retried like any failure", merchant)
		for _, l := range log {
			require.Zero(t, l.HTTPStatus)
			require.True(t, strings.HasPrefix(l.Error, want), "%s: %s", merchant, l.Error)
		}
	}
	require.Zero(t, rc.conns.Load(), "no connection was made to the receiver")
	require.Empty(t, rc.got())

	// Development delivers to loopback, by name too.
	dev := setup(t)
	shop := dev.merchant(t, "shop")
	dev.set(t, "shop", "http://localhost:"+port+"/hooks")
	dev.start(t, testConfig())
	webhooktest.Publish(t, dev.js, newEvent(shop))
	waitFor(t, eventually, "delivered in development", func() bool { return len(rc.got()) == 1 })
}

// TestReach_DialRefusesWhatTheNameResolvesTo: the worker's dialer refuses
// a name if any address it resolves to is refused, before any connection,
// and checks the literal address it dials.
func TestReach_DialRefusesWhatTheNameResolvesTo(t *testing.T) {
	t.Parallel()
	r := newReach(Config{Production: true, LookupHost: fakeDNS(testNames)})
	dial := r.dialContext(&net.Dialer{Timeout: time.Second})
	for address, want := range map[string]string{
		"mixed.example.com:443":         "mixed.example.com resolves to 127.0.0.1 is a loopback address",
		"metadata-alias.example.com:80": "169.254.169.254 is a link-local address",
		"169.254.169.254:80":            "169.254.169.254 is a link-local address",
		"[::ffff:127.0.0.1]:443":        "127.0.0.1 is a loopback address",
		"metadata.google.internal:80":   "metadata.google.internal is a cloud metadata service",
	} {
		_, err := dial(context.Background(), "tcp", address)
		var forbidden *errForbiddenAddress
		require.True(t, errors.As(err, &forbidden), "%s: %v", address, err)
		require.ErrorContains(t, err, want, address)
	}
	_, err := dial(context.Background(), "tcp", "unresolvable.example.com:443")
	var dnsErr *net.DNSError
	require.ErrorAs(t, err, &dnsErr, "a name that does not resolve is a network error, retried")
}
