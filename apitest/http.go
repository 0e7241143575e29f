package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ChargeBody is a chargeCard request body whose input is the raw JSON given,
// so that a test can send what no JSON encoder would.
func ChargeBody(key, rawInput string) string {
	return `{"query":` + strconv.Quote(ChargeCardMutation) + `,"variables":{"key":` + strconv.Quote(key) + `,"input":` + rawInput + `}}`
}

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

func JSONBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return bytes.NewReader(b)
}
