package graph

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// timeoutBody is a request body whose client stopped sending: the server's
// read deadline passes.
type timeoutBody struct{}

func (timeoutBody) Read([]byte) (int, error) {
	return 0, &os.PathError{Op: "read", Path: "tcp 127.0.0.1:8080->127.0.0.1:56128", Err: os.ErrDeadlineExceeded}
}
func (timeoutBody) Close() error { return nil }

type brokenBody struct{}

func (brokenBody) Read([]byte) (int, error) {
	return 0, errors.New("read tcp 10.0.0.1:8080: connection reset by peer")
}
func (brokenBody) Close() error { return nil }

func TestEdge_UnreadableBody_AnswersAFixedMessage(t *testing.T) {
	t.Parallel()
	h := NewHandler(&Resolver{}, HandlerConfig{})
	for name, tt := range map[string]struct {
		body interface {
			Read([]byte) (int, error)
			Close() error
		}
		status int
		code   string
	}{
		"read timeout": {timeoutBody{}, http.StatusRequestTimeout, "REQUEST_TIMEOUT"},
		"broken":       {brokenBody{}, http.StatusBadRequest, "BAD_USER_INPUT"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/graphql", nil)
		req.Body = tt.body
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, tt.status, rec.Code, name)
		var resp struct {
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp), name)
		require.Len(t, resp.Errors, 1, name)
		require.Equal(t, tt.code, resp.Errors[0].Extensions["code"], name)
		for _, leak := range []string{"tcp", "127.0.0.1", "10.0.0.1", "reset", "deadline"} {
			require.NotContains(t, strings.ToLower(resp.Errors[0].Message), leak, "%s: a fixed message", name)
		}
	}
}

// TestEdge_URLQueryOverTheBodyLimit_Is414 holds the URL's query, where a
// GET carries its document, to the body's limit, whatever the method, and
// before anything else is read.
func TestEdge_URLQueryOverTheBodyLimit_Is414(t *testing.T) {
	t.Parallel()
	const limit = 1024
	h := NewHandler(&Resolver{}, HandlerConfig{MaxBodyBytes: limit})
	query := func(n int) string {
		q := "query=" + url.QueryEscape("{ __typename }") + "&pad="
		return q + strings.Repeat("x", n-len(q))
	}
	for _, tt := range []struct {
		method string
		size   int
		status int
	}{
		{http.MethodGet, limit, http.StatusOK},
		{http.MethodGet, limit + 1, http.StatusRequestURITooLong},
		{http.MethodPost, limit + 1, http.StatusRequestURITooLong},
		{http.MethodOptions, limit + 1, http.StatusRequestURITooLong},
	} {
		req := httptest.NewRequest(tt.method, "/graphql?"+query(tt.size), nil)
		req.Body = brokenBody{} // never read: the URL is refused first
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, tt.status, rec.Code, "%s with a query of %d bytes: %s", tt.method, tt.size, rec.Body)
		if tt.status == http.StatusOK {
			continue
		}
		a := decodeAnswer(t, rec)
		require.Equal(t, codeRequestTooLarge, a.code())
		require.Contains(t, a.Errors[0].Message, "1024 bytes")
		require.Contains(t, a.Errors[0].Message, "POST")
		require.NotContains(t, rec.Body.String(), "xxxx", "the URL is not echoed")
	}
}
