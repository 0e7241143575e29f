package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A POST body is one JSON object and nothing after it but white space. A
// stray '}' or ']' after the object once got through (found by
// FuzzDecodeRequest); the request then ran as if it were well-formed.
func TestPOST_DataAfterTheJSONBody_IsRefused(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	auth := jsonHeaders("Authorization", "Bearer demo-key")
	const body = `{"query":"{ __typename }"}`

	ok := s.send(t, http.MethodPost, "/graphql", auth, strings.NewReader(body+" \r\n\t"))
	require.Equal(t, http.StatusOK, ok.status, "%s", ok.body)
	require.Empty(t, ok.gql(t).Errors)

	for _, trailing := range []string{"}", "]", "}}", ",", ` {"query":"{ __typename }"}`, "x"} {
		r := s.send(t, http.MethodPost, "/graphql", auth, strings.NewReader(body+trailing))
		require.Equal(t, http.StatusBadRequest, r.status, "%q: %s", trailing, r.body)
		require.Equal(t, "BAD_USER_INPUT", r.gql(t).code(t), "%q", trailing)
	}
}
