package graph

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"chargeonce/merchant"
	"chargeonce/payment"
)

type stateKey struct{}

// requestState is what the HTTP edge learns about one /graphql request and
// the resolvers, the transports and the error presenter share: who is
// calling, the Idempotency-Key header, and how the answer should be sent.
type requestState struct {
	id     string // X-Request-Id, the client's or minted
	remote string // the client's address, as the rate limits count it
	stream streamKind

	// Authentication, done once by the edge (or, for a websocket, at its
	// connection_init, before any operation): the merchant, or why not.
	merchant *payment.Merchant
	authErr  error
	// kind and keyID name the key that authenticated; seed is its secret
	// material for checkout sessions' client secrets (merchant.SessionSeed).
	kind  merchant.KeyKind
	keyID uuid.UUID
	seed  []byte
	// apiKey is the key itself, which a stream's operations and re-checks
	// authenticate again. Never logged.
	apiKey string
	// conn is the websocket or event stream this request opened; nil for
	// a request.
	conn *streamConn

	// origin is the Origin header, "" when absent; sameOrigin says the page
	// was served by this server's own host.
	origin     string
	sameOrigin bool

	// headerKey is the Idempotency-Key header, "" when absent.
	headerKey    string
	hasHeaderKey bool

	mu sync.Mutex
	// operation and rootField are what the request ran, for the access log
	// and the metrics; set by the transports once the document is parsed.
	operation string
	rootField string
	// status overrides HTTP 200 when an error calls for another status
	// (SERVICE_UNAVAILABLE: 503), with the retry hint for Retry-After.
	status     int
	retryAfter time.Duration
	// replay is set when the request's chargeCard answered a replay of a
	// settled charge (offerReplay): its answer may be stored.
	replay *payment.Replay
}

func withState(ctx context.Context, st *requestState) context.Context {
	return context.WithValue(ctx, stateKey{}, st)
}

// stateFrom returns the request's state; a fresh, unauthenticated one when
// the context did not come through the edge.
func stateFrom(ctx context.Context) *requestState {
	if st, ok := ctx.Value(stateKey{}).(*requestState); ok {
		return st
	}
	return &requestState{authErr: errNoCredentials}
}

// RequestID returns the id of the request ctx belongs to, "" outside one.
func RequestID(ctx context.Context) string {
	if st, ok := ctx.Value(stateKey{}).(*requestState); ok {
		return st.id
	}
	return ""
}

// answerWith asks for an HTTP status other than 200 for this response; the
// most urgent one wins (503 over 429).
func (st *requestState) answerWith(status int, retryAfter time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if status > st.status {
		st.status = status
	}
	st.retryAfter = max(st.retryAfter, retryAfter)
}

func (st *requestState) setOperation(name, rootField string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.operation, st.rootField = name, rootField
}

func (st *requestState) snapshot() (operation, rootField string, status int, retryAfter time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.operation, st.rootField, st.status, st.retryAfter
}

var (
	errNoCredentials = payment.Errorf(payment.EUNAUTHENTICATED, "missing API key: send the header Authorization: Bearer <api key>")
	errBadAuthHeader = payment.Errorf(payment.EUNAUTHENTICATED, "the Authorization header must be: Bearer <api key>")
)

// merchant returns the authenticated merchant of the request.
func (r *Resolver) merchant(ctx context.Context) (payment.Merchant, error) {
	st := stateFrom(ctx)
	if st.authErr != nil {
		return payment.Merchant{}, st.authErr
	}
	if st.merchant == nil {
		return payment.Merchant{}, errNoCredentials
	}
	return *st.merchant, nil
}

// headerKeyAgrees checks the mutation's idempotencyKey argument against the
// Idempotency-Key header: both may be sent, but they must agree.
func headerKeyAgrees(ctx context.Context, arg string) (string, error) {
	st := stateFrom(ctx)
	if st.hasHeaderKey && st.headerKey != arg {
		return "", &payment.Error{Code: payment.EINVALID, Field: "idempotencyKey",
			Message: "the Idempotency-Key header and the idempotencyKey argument differ; send the same key in both, or only one"}
	}
	return arg, nil
}

// unquote accepts the header both as the IETF draft's quoted string
// ("abc") and as a bare value (abc).
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// statusWriter applies the status the request's errors asked for and
// records what was sent, for the access log.
type statusWriter struct {
	http.ResponseWriter
	st          *requestState
	status      int
	bytes       int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if _, _, status, retryAfter := w.st.snapshot(); status != 0 && code == http.StatusOK {
		code = status
		if retryAfter > 0 {
			w.Header().Set("Retry-After", retryAfterSeconds(retryAfter))
		}
	}
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flush, hijack).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
