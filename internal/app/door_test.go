package app

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
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
