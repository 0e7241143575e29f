package devfault

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

type bundle struct {
	url    string
	client *http.Client
	calls  *atomic.Int32
}

// setup serves a handler that counts its calls and answers a JSON body, as
// the GraphQL endpoint does, behind Inject on a real HTTP server.
func setup(t *testing.T) bundle {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(Inject(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":{"chargeCard":{"status":"SUCCEEDED"}}}`)
	}), nil))
	t.Cleanup(srv.Close)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	return bundle{url: srv.URL, client: &http.Client{Transport: transport}, calls: &calls}
}

// post sends a POST and reads the whole answer; err is the first error, from
// the request or from reading the body.
func (b bundle) post(t *testing.T, header http.Header) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+"/graphql", strings.NewReader(`{"query":"mutation{}"}`))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

func TestInject_DropResponse_HandlerRunsAndClientGetsNetworkError(t *testing.T) {
	t.Parallel()
	b := setup(t)

	resp, _, err := b.post(t, http.Header{Header: {DropResponse}})

	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the body must be cut short")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the status and headers arrive")
	require.Equal(t, int32(1), b.calls.Load(), "the handler ran once, to the end")
}

// A connection closed before any byte of the response, on a reused keep-alive
// connection, is taken by clients for a stale connection and the request is
// sent again without telling anyone (Chromium does it for a POST; Go does it
// for a request with an Idempotency-Key). Cutting after the headers must make
// the error visible instead.
func TestInject_DropResponse_OnReusedConnection_IsNotSilentlyResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, _, err := b.post(t, nil) // opens the keep-alive connection
	require.NoError(t, err)

	_, _, err = b.post(t, http.Header{Header: {DropResponse}, "Idempotency-Key": {"k1"}})

	require.Error(t, err)
	require.Equal(t, int32(2), b.calls.Load(), "the dropped request ran once and was not resent")
}

func TestInject_NoFault_PassesThrough(t *testing.T) {
	t.Parallel()
	b := setup(t)

	resp, body, err := b.post(t, nil)

	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"data":{"chargeCard":{"status":"SUCCEEDED"}}}`, body)
	require.Equal(t, int32(1), b.calls.Load())
}

func TestInject_UnknownFault_RefusedWithoutRunningHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)

	resp, body, err := b.post(t, http.Header{Header: {"drop-everything"}})

	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, DropResponse)
	require.Equal(t, int32(0), b.calls.Load())
}
