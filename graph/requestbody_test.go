package graph

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A POST body is one JSON object and nothing after it but white space. A
// stray '}' or ']' after the object once got through (found by
// FuzzDecodeRequest); the request then ran as if it were well-formed.
func TestPOST_DataAfterTheJSONBody_IsRefused(t *testing.T) {
	t.Parallel()
	h := NewHandler(&Resolver{}, HandlerConfig{})
	const body = `{"query":"{ __typename }"}`
	post := func(body string) (int, []map[string]any) {
		req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var resp struct {
			Errors []map[string]any `json:"errors"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp), "not a GraphQL response: %s", rec.Body)
		return rec.Code, resp.Errors
	}

	status, errs := post(body + " \r\n\t")
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, errs)

	for _, trailing := range []string{"}", "]", "}}", ",", ` {"query":"{ __typename }"}`, "x"} {
		status, errs := post(body + trailing)
		require.Equal(t, http.StatusBadRequest, status, "%q", trailing)
		require.Len(t, errs, 1, "%q", trailing)
		require.Equal(t, "BAD_USER_INPUT", errs[0]["extensions"].(map[string]any)["code"], "%q", trailing)
	}
}
