package ratelimit

import (
	"net/http"
	"net/netip"
)

// ClientAddress is the key of r's client in a per-address Limiter: the
// peer's address, where an IPv6 peer counts as its /64, which one host
// usually owns whole (so that it cannot rotate through its addresses).
// Every per-address limit keys its buckets by it, so that an address is one
// client to all of them.
func ClientAddress(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	addr := ap.Addr().Unmap()
	if addr.Is6() {
		if p, err := addr.Prefix(64); err == nil {
			return p.String()
		}
	}
	return addr.String()
}
