package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// The transports of /graphql: POST with a JSON body and GET with the query
// in the URL, after the GraphQL-over-HTTP spec. They replace gqlgen's own so
// that every answer, a malformed request's included, is a GraphQL error with
// an extensions.code and a fixed message: gqlgen's echo the request body and
// name Go types.

// bodyKey carries the request body, read and bounded by the edge.
type bodyKey struct{}

// postTransport serves POST /graphql with Content-Type application/json,
// a replay it answered before from its stored answer.
type postTransport struct{ answers *storedAnswers }

func (postTransport) Supports(r *http.Request) bool {
	return r.Method == http.MethodPost && r.Header.Get("Upgrade") == "" && isJSON(r.Header.Get("Content-Type"))
}

func (t postTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	start := graphql.Now()
	body, _ := ctx.Value(bodyKey{}).([]byte)
	st := stateFrom(ctx)
	if t.answers.serve(ctx, w, st, body) {
		return
	}
	params, err := DecodeRequest(body)
	if err != nil {
		var rerr *RequestError
		errors.As(err, &rerr)
		writeError(w, http.StatusBadRequest, rerr)
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	if oc, resp, answer := execute(w, r, exec, params, false); resp != nil {
		t.answers.keep(st, body, oc, resp, answer)
	}
}

// getTransport serves GET /graphql?query=…: queries only, never mutations.
type getTransport struct{}

func (getTransport) Supports(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get("Upgrade") == ""
}

func (getTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	start := graphql.Now()
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, badRequest(codeBadUserInput, "", "the query string of the URL is malformed"))
		return
	}
	params := &graphql.RawParams{Query: q.Get("query"), OperationName: q.Get("operationName"), Headers: r.Header}
	for _, p := range []struct {
		name string
		dst  *map[string]any
	}{{"variables", &params.Variables}, {"extensions", &params.Extensions}} {
		if v := q.Get(p.name); v != "" {
			if err := decodeObject([]byte(v), p.dst); err != nil {
				writeError(w, http.StatusBadRequest, badRequest(codeBadUserInput, p.name,
					"the "+p.name+" parameter must be a JSON object"))
				return
			}
		}
	}
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	execute(w, r, exec, params, true)
}

// execute parses, validates and runs one operation and writes its answer.
// It returns what it ran, the response and its bytes as written; a nil
// response when it ran nothing.
func execute(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor, params *graphql.RawParams, queryOnly bool) (
	*graphql.OperationContext, *graphql.Response, []byte) {
	ctx := r.Context()
	w.Header().Set("Content-Type", "application/json")
	oc, errs := exec.CreateOperationContext(ctx, params)
	if oc != nil && oc.Operation != nil {
		stateFrom(ctx).setOperation(oc.Operation.Name, rootField(oc))
	}
	if errs != nil {
		// A well-formed request whose document or variables are refused: as
		// the GraphQL-over-HTTP spec asks of application/json, status 200.
		writeJSON(w, exec.DispatchError(graphql.WithOperationContext(ctx, oc), errs))
		return nil, nil, nil
	}
	if queryOnly && oc.Operation.Operation != ast.Query {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, badRequest(codeBadRequest, "",
			"GET requests may run queries only; send mutations with POST"))
		return nil, nil, nil
	}
	responses, ctx := exec.DispatchOperation(ctx, oc)
	resp := responses(ctx)
	return oc, resp, writeJSON(w, resp)
}

// rootField names what an operation runs, for metrics: its one root field,
// "multiple", or "introspection"; a closed set, whatever the client sends.
func rootField(oc *graphql.OperationContext) string {
	root := "Query"
	switch oc.Operation.Operation {
	case ast.Mutation:
		root = "Mutation"
	case ast.Subscription:
		root = "Subscription"
	}
	name := ""
	for _, f := range graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{root}) {
		n := f.Name
		switch n {
		case "chargeCard", "chargeStatus", "chargeUpdated", "createCheckoutSession", "checkoutSession":
		case "__schema", "__type", "__typename":
			n = "introspection"
		default:
			n = "other"
		}
		if name != "" && name != n {
			return "multiple"
		}
		name = n
	}
	return name
}

// decodeMessage is the one answer to a body that is not a GraphQL request.
const decodeMessage = `the request body is not a GraphQL request: send a JSON object {"query": "...", "variables": {...}}`

// DecodeRequest reads a POST body: a JSON object with a string "query", and
// optional "operationName" (string), "variables" and "extensions" (objects);
// other members are ignored. Numbers stay json.Number, so that an Int input
// can tell 100 from 1e2 or 100.0. An error is a *RequestError that quotes
// none of the input and names the offending member.
func DecodeRequest(body []byte) (*graphql.RawParams, error) {
	// One pass: the members are read from the body's token stream, each
	// value decoded where it stands, rather than the body split into raw
	// members first and each decoded again.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, badRequest(codeBadUserInput, "", decodeMessage)
	}
	params := &graphql.RawParams{}
	strs := [...]*string{&params.Query, &params.OperationName}
	objs := [...]*map[string]any{&params.Variables, &params.Extensions}
	// A member's type is judged by its last occurrence, as a JSON object's
	// reader keeps the last of duplicate names.
	var bad [len(bodyMembers)]bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, badRequest(codeBadUserInput, "", decodeMessage)
		}
		name, _ := t.(string)
		i := slices.Index(bodyMembers[:], name)
		var dst any
		switch {
		case i >= len(strs):
			*objs[i-len(strs)] = nil
			dst = objs[i-len(strs)]
		case i >= 0:
			*strs[i] = ""
			dst = strs[i]
		default:
			// Another member: read past it.
			dst = &struct{}{}
		}
		err = dec.Decode(dst)
		var typeErr *json.UnmarshalTypeError
		switch {
		case err == nil:
			if i >= 0 {
				bad[i] = false
			}
		case errors.As(err, &typeErr):
			// The value is read whole; only its type is wrong.
			if i >= 0 {
				bad[i] = true
			}
		default:
			return nil, badRequest(codeBadUserInput, "", decodeMessage)
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, badRequest(codeBadUserInput, "", decodeMessage)
	}
	// Only white space may follow.
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest(codeBadUserInput, "", decodeMessage)
	}
	// In a fixed order, so that a body with several bad members always gets
	// the same answer.
	for i, name := range bodyMembers {
		if bad[i] {
			kind := "a string"
			if i >= len(strs) {
				kind = "a JSON object"
			}
			return nil, badRequest(codeBadUserInput, name, name+" must be "+kind)
		}
	}
	return params, nil
}

// bodyMembers are the members of a POST body that DecodeRequest reads, in
// the order its errors name them: the strings, then the objects.
var bodyMembers = [...]string{"query", "operationName", "variables", "extensions"}

// decodeObject decodes exactly one JSON value into dst, with numbers as
// json.Number, and refuses anything after it.
func decodeObject(b []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	// Only white space may follow. Token says io.EOF then; More alone would
	// let a stray '}' or ']' through.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// Codes of errors raised at the HTTP edge, before any resolver runs.
const (
	codeBadUserInput       = "BAD_USER_INPUT"
	codeBadRequest         = "BAD_REQUEST"
	codeRequestTooLarge    = "REQUEST_TOO_LARGE"
	codeRequestTimeout     = "REQUEST_TIMEOUT"
	codeRateLimited        = "RATE_LIMITED"
	codeServiceUnavailable = "SERVICE_UNAVAILABLE"
)

// RequestError is an error about the HTTP request itself, answered before
// any resolver runs.
type RequestError struct {
	Code       string
	Field      string // the offending member or header, when there is one
	Message    string
	RetryAfter time.Duration
}

func (e *RequestError) Error() string { return e.Code + ": " + e.Message }

func badRequest(code, field, message string) *RequestError {
	return &RequestError{Code: code, Field: field, Message: message}
}

// WriteError answers a request refused before it reaches the GraphQL
// handler (the server's host names) as the edge answers its own refusals.
func WriteError(w http.ResponseWriter, status int, err *RequestError) { writeError(w, status, err) }

// gqlError is e as a GraphQL error: its code, the field it names, and
// the wait it asks for.
func (e *RequestError) gqlError() *gqlerror.Error {
	ext := map[string]any{"code": e.Code}
	if e.Field != "" {
		ext["field"] = e.Field
	}
	if e.RetryAfter > 0 {
		ext["retryAfterMs"] = retryAfterMs(e.RetryAfter)
	}
	return &gqlerror.Error{Message: e.Message, Extensions: ext}
}

// writeError answers the request with one error, as a GraphQL response;
// a stream's operation gets the same error (gqlError).
func writeError(w http.ResponseWriter, status int, err *RequestError) {
	if err.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfterSeconds(err.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	writeJSON(w, &graphql.Response{Errors: gqlerror.List{err.gqlError()}})
}

func writeJSON(w http.ResponseWriter, resp *graphql.Response) []byte {
	b, err := json.Marshal(resp)
	if err != nil {
		// A response is data the resolvers built from the schema's types;
		// it always encodes.
		panic(err)
	}
	_, _ = w.Write(b)
	return b
}

// isJSON reports whether a Content-Type is application/json.
func isJSON(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "application/json"
}
