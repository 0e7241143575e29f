package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"chargeonce/db/dbtest"
	"chargeonce/graph/graphtest"
	"chargeonce/merchant"
)

// The document bounds on every way a document reaches the executor: POST,
// GET, a persisted query, a websocket and an event stream.

// answer is a GraphQL answer over HTTP, read whole.
type answer struct {
	status int
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

func (a answer) code() string {
	if len(a.Errors) == 0 {
		return ""
	}
	code, _ := a.Errors[0].Extensions["code"].(string)
	return code
}

func decodeAnswer(t *testing.T, rec *httptest.ResponseRecorder) answer {
	t.Helper()
	a := answer{status: rec.Code}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a), "HTTP %d: %s", rec.Code, rec.Body)
	return a
}

// repeatedTypename is the document: one response name, thousands of times.
func repeatedTypename(n int) string { return "{" + strings.Repeat(" __typename", n) + " }" }

func TestDocumentLimits_PostAndGet_RefusedBeforeValidation(t *testing.T) {
	t.Parallel()
	h := NewHandler(&Resolver{}, HandlerConfig{})
	hostile := repeatedTypename(1000)

	post := decodeAnswer(t, serve(h, `{"query":`+jsonString(hostile)+`}`, ""))
	require.Equal(t, http.StatusOK, post.status, "as validation errors are answered")
	require.Equal(t, codeComplexityLimit, post.code())
	require.Contains(t, post.Errors[0].Message, "more than "+strconv.Itoa(MaxResponseNameRepeats)+" times")
	require.Contains(t, []string{"", "null"}, string(post.Data), "nothing ran")

	req := httptest.NewRequest(http.MethodGet, "/graphql?query="+url.QueryEscape(hostile), nil)
	req.RemoteAddr = "192.0.2.1:4321"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	get := decodeAnswer(t, rec)
	require.Equal(t, http.StatusOK, get.status)
	require.Equal(t, codeComplexityLimit, get.code())

	// The same server still answers a document within the bounds.
	ok := decodeAnswer(t, serve(h, `{"query":`+jsonString(repeatedTypename(MaxResponseNameRepeats))+`}`, ""))
	require.Empty(t, ok.Errors)
	require.JSONEq(t, `{"__typename":"Query"}`, string(ok.Data))
}

func TestDocumentLimits_PersistedQuery_IsCheckedAsTheDocument(t *testing.T) {
	t.Parallel()
	h := NewHandler(&Resolver{}, HandlerConfig{})
	hostile := repeatedTypename(1000)
	sum := sha256.Sum256([]byte(hostile))
	ext := `"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + hex.EncodeToString(sum[:]) + `"}}`

	withQuery := decodeAnswer(t, serve(h, `{"query":`+jsonString(hostile)+`,`+ext+`}`, ""))
	require.Equal(t, codeComplexityLimit, withQuery.code())
	// The hash alone now names the stored document: checked as well.
	hashOnly := decodeAnswer(t, serve(h, `{`+ext+`}`, ""))
	require.Equal(t, codeComplexityLimit, hashOnly.code())
}

func TestDocumentLimits_AValidatedDocument_IsNotCheckedAgain(t *testing.T) {
	t.Parallel()
	cache := lru.New[*ast.QueryDocument](10)
	l := documentLimits{validated: cache}
	ctx := context.Background()
	// A document over the bounds stands for one the check would refuse:
	// once in the cache, it passed validation, and goes by.
	query := repeatedTypename(MaxResponseNameRepeats + 1)
	require.NotNil(t, checkDocument(query))
	cache.Add(ctx, query, &ast.QueryDocument{})
	require.Nil(t, l.MutateOperationParameters(ctx, &graphql.RawParams{Query: query}))
	require.NotNil(t, l.MutateOperationParameters(ctx, &graphql.RawParams{Query: query + " "}), "another document is checked")
}

func TestDocumentLimits_WebsocketAndEventStream_RefuseAsPOSTDoes(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	merchants := merchant.New(pool, true)
	_, err := merchants.EnsureDevelopmentKey(context.Background(), "demo", "demo-key", merchant.KeySecret)
	require.NoError(t, err)
	srv := httptest.NewServer(NewHandler(&Resolver{Merchants: merchants}, HandlerConfig{}))
	t.Cleanup(srv.Close)
	// A subscription, the one kind the streams carry, repeating its fields:
	// refused for its shape before validation would look at it.
	hostile := `subscription($key: String!) { chargeUpdated(idempotencyKey: $key) {` +
		strings.Repeat(" status", 1000) + ` } }`
	vars := map[string]any{"key": "document-limits"}

	ws := graphtest.DialWS(t, srv.URL, http.Header{"Authorization": {"Bearer demo-key"}})
	ack, err := ws.Init(t, nil)
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	ws.Subscribe(t, "1", hostile, vars)
	m := ws.Next(t, "1")
	require.Equal(t, codeComplexityLimit, m.Code(t))
	require.Contains(t, m.Errors[0].Message, "more than "+strconv.Itoa(MaxResponseNameRepeats)+" times")

	resp, _ := graphtest.PostSSE(t, srv.Client(), srv.URL, map[string]string{"Authorization": "Bearer demo-key"}, hostile, vars)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sse := graphtest.NewSSE(resp)
	require.Equal(t, codeComplexityLimit, sse.MustNext(t).Code(t))
}

// TestDocumentLimits_PlaygroundIntrospection_IsAnswered: GraphiQL's
// introspection query, the largest legitimate document, is answered whole
// in development.
func TestDocumentLimits_PlaygroundIntrospection_IsAnswered(t *testing.T) {
	t.Parallel()
	h := NewHandler(&Resolver{}, HandlerConfig{})
	query := readRepoFile(t, "graph/testdata/documents/introspection.graphql")
	a := decodeAnswer(t, serve(h, `{"query":`+jsonString(query)+`}`, ""))
	require.Empty(t, a.Errors)
	require.Contains(t, string(a.Data), `"chargeCard"`)
}
