package app_test

import (
	"chargeonce/apitest"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServer_ProbesAndPlaygroundAnswer_QueriesRunOverGET(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	for path, want := range map[string]string{
		"/healthz":    "ok",
		"/readyz":     "ok",
		"/playground": "Bearer demo-key",
	} {
		resp, err := s.Client.Get(s.URL + path)
		require.NoError(t, err)
		var body strings.Builder
		_, err = io.Copy(&body, resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, path)
		require.Contains(t, body.String(), want, path)
	}
	// Queries work over GET too.
	resp, err := s.Client.Get(s.URL + "/graphql?query=" + url.QueryEscape(`{ __typename }`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}
