package graph

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"chargeonce/merchant"
	"chargeonce/payment"
)

// What a browser may do: a checkout page calls /graphql from the merchant's
// own origin with a publishable key, which alone grants nothing and with a
// checkout session's client secret pays that session. Cross-origin
// requests are served (CORS) to the origins the merchant registered, and
// only with its publishable keys; a secret key from a browser is refused in
// production.

// codeForbidden refuses what the presented key's kind may not do.
const codeForbidden = "FORBIDDEN"

// originChecker answers which origins merchants registered.
type originChecker interface {
	OriginAllowed(ctx context.Context, merchantID uuid.UUID, origin string) (bool, error)
	AnyOriginAllowed(ctx context.Context, origin string) (bool, error)
}

// publishableFields are the root fields a publishable key may run, each
// only with a checkout session's client secret.
var publishableFields = map[string]bool{"chargeCard": true, "chargeStatus": true, "chargeUpdated": true, "__typename": true}

var (
	errSecretFromBrowser = &RequestError{Code: codeForbidden, Field: "Authorization",
		Message: "a secret key must not be used from a browser; use a publishable key and a checkout session"}
	errOriginNotRegistered = &RequestError{Code: codeForbidden, Field: "Origin",
		Message: "this origin is not registered for the merchant's checkout pages; register it with `chargeonce merchant origins add <merchant> <origin>`"}
	errNeedsSession = payment.Errorf(payment.EFORBIDDEN,
		"a publishable key may only pay a checkout session: send the session's client secret as checkoutSession")
)

// needsSecretKey refuses an operation a publishable key may not run.
func needsSecretKey(what string) *gqlerror.Error {
	return limitError(codeForbidden, what+" needs a secret key (co_sk_…), on the merchant's server; a publishable key (co_pk_…) may only run chargeCard, chargeStatus and chargeUpdated, with a checkout session's client secret")
}

// checkKeyKind refuses, as a whole, an operation of a publishable key that
// runs anything but its three fields (introspection included), or more than
// one of them: aliases would fan one request out into as many lookups of
// guessed keys and secrets as the document holds.
func checkKeyKind(st *requestState, oc *graphql.OperationContext) *gqlerror.Error {
	if st.kind != merchant.KeyPublishable {
		return nil
	}
	root := map[ast.Operation]string{ast.Query: "Query", ast.Mutation: "Mutation", ast.Subscription: "Subscription"}[oc.Operation.Operation]
	operations := 0
	for _, f := range graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{root}) {
		if !publishableFields[f.Name] {
			st.answerWith(http.StatusForbidden, 0)
			return needsSecretKey(f.Name)
		}
		if f.Name != "__typename" {
			operations++
		}
	}
	if operations > 1 {
		return limitError(codeBadRequest, fmt.Sprintf(
			"a request with a publishable key may run one operation (chargeCard, chargeStatus or chargeUpdated); this one runs %d. Nothing was run: send one request per operation", operations))
	}
	return nil
}

// secretKeyOnly resolves a field marked @secretKeyOnly: the merchant's own
// record (a refund's reason), answered to a secret key and null to a
// publishable key, which any page holds. SECURITY.md lists what the browser
// may read, field by field.
func secretKeyOnly(ctx context.Context, _ any, next graphql.Resolver) (any, error) {
	if stateFrom(ctx).kind == merchant.KeyPublishable {
		return nil, nil
	}
	return next(ctx)
}

// sameOrigin reports whether origin is the origin of the request's own
// host: the page was served by this server (the development demo).
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// checkOrigin applies the browser rules to an authenticated request that
// carries an Origin header (st.origin): a secret key is refused in
// production, and from another origin always; a publishable key from
// another origin is served only to an origin its merchant registered.
// cors says to send the CORS headers that let the page read the answer.
func (e *edge) checkOrigin(ctx context.Context, st *requestState) (cors bool, status int, err *RequestError) {
	if st.origin == "" || st.merchant == nil {
		return false, 0, nil
	}
	if st.kind != merchant.KeyPublishable {
		if e.production || !st.sameOrigin {
			// A page that holds a secret key is the mistake to make loud:
			// refused before it runs, rather than run unreadably.
			return false, http.StatusForbidden, errSecretFromBrowser
		}
		return false, 0, nil // development: the playground, on its own origin
	}
	if st.sameOrigin {
		return false, 0, nil
	}
	lookupCtx, cancel := context.WithTimeout(ctx, e.authTimeout)
	ok, lerr := e.origins.OriginAllowed(lookupCtx, st.merchant.ID, st.origin)
	cancel()
	if lerr != nil {
		return false, http.StatusServiceUnavailable, unavailable()
	}
	if !ok {
		return false, http.StatusForbidden, errOriginNotRegistered
	}
	return true, 0, nil
}

// allowCORS lets the page of st's origin read the answer.
func allowCORS(w http.ResponseWriter, st *requestState) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", st.origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Retry-After, X-Request-Id, X-Trace-Id, traceresponse")
}

// websocketOrigin admits the upgrade of a websocket from another origin
// whose key comes later, in connection_init: only from an origin some
// merchant registered (connection_init then checks it against the key's).
func (e *edge) websocketOrigin(ctx context.Context, st *requestState) (int, *RequestError) {
	lookupCtx, cancel := context.WithTimeout(ctx, e.authTimeout)
	ok, err := e.origins.AnyOriginAllowed(lookupCtx, st.origin)
	cancel()
	switch {
	case err != nil:
		return http.StatusServiceUnavailable, unavailable()
	case !ok:
		return http.StatusForbidden, &RequestError{Code: codeBadRequest, Field: "Origin", Message: "cross-origin websockets are refused, except from an origin registered for a merchant's checkout pages"}
	}
	return 0, nil
}

// corsMaxAge is how long a browser may keep a preflight's answer.
const corsMaxAge = "600"

// preflight answers a CORS preflight. It names no key, so it is allowed for
// an origin any merchant registered (the request itself is then checked
// against the key's merchant); counted against the client address like
// unauthenticated traffic.
func (e *edge) preflight(w http.ResponseWriter, r *http.Request, st *requestState) {
	if ok, wait := e.ipLimit.Allow(st.remote); !ok {
		status, err := e.limited("ip", wait)
		e.refused(r.Context(), st, status, err)
		writeError(w, status, err)
		return
	}
	origin := r.Header.Get("Origin")
	lookupCtx, cancel := context.WithTimeout(r.Context(), e.authTimeout)
	ok, err := e.origins.AnyOriginAllowed(lookupCtx, origin)
	cancel()
	h := w.Header()
	h.Add("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
	switch {
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, unavailable())
	case !ok:
		e.refused(r.Context(), st, http.StatusForbidden, errOriginNotRegistered)
		writeError(w, http.StatusForbidden, errOriginNotRegistered)
	default:
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Methods", "POST, GET")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Idempotency-Key, X-Request-Id, traceparent, tracestate")
		h.Set("Access-Control-Max-Age", corsMaxAge)
		w.WriteHeader(http.StatusNoContent)
	}
}

// isPreflight reports whether r is a CORS preflight.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

func unavailable() *RequestError {
	return &RequestError{Code: codeServiceUnavailable, RetryAfter: payment.UnavailableRetryAfter,
		Message: "the payment database is unavailable; nothing was run. Retry after retryAfterMs"}
}
