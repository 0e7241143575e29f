package ratelimit

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClientAddress_IPv6CountsAsItsSlash64(t *testing.T) {
	t.Parallel()
	for remote, want := range map[string]string{
		"192.0.2.7:41234":            "192.0.2.7",
		"[::ffff:192.0.2.7]:41234":   "192.0.2.7", // an IPv4 peer on a dual-stack socket
		"[2001:db8:1:2:aaaa::1]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::9]:443": "2001:db8:1:2::/64",
		"[::1]:8080":                 "::/64",
		"not an address":             "not an address",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		require.Equal(t, want, ClientAddress(r), remote)
	}
}
