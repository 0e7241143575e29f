package graph

import (
	"cmp"
	"context"
	"errors"
	"go.opentelemetry.io/otel/trace"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"chargeonce/merchant"
	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/ratelimit"
	"chargeonce/request"
	"chargeonce/tracing"
)

// edge is the HTTP front of /graphql. Before any GraphQL work, and before
// it allocates anything in proportion to the input, it refuses what is not a
// GraphQL request chargeonce serves (method, media type, a body over the
// limit, ambiguous headers), rations callers (per merchant, and per client IP
// for unauthenticated traffic), and authenticates the API key once. Every
// request gets an id (X-Request-Id) and one access log line. A websocket
// (graphql-transport-ws) is one request, logged when it closes; its key may
// come in connection_init instead of a header (stream.go). A stream is
// counted and bounded from its admission to its end (streamconn.go), and
// each of a websocket's operations is admitted as a request is
// (streamops.go).
type edge struct {
	next          http.Handler
	merchants     authenticator
	maxBody       int64
	merchantLimit *ratelimit.Limiter
	ipLimit       *ratelimit.Limiter
	// publishable and publishableIP ration publishable keys' requests, per
	// merchant and per client address, apart from merchantLimit.
	publishable   *ratelimit.Limiter
	publishableIP *ratelimit.Limiter
	authTimeout   time.Duration
	streams       *Streams // the open streams: their caps, lifetime and re-checks
	origins       originChecker
	production    bool
	log           *slog.Logger
	metrics       *metrics.Metrics
}

type authenticator interface {
	Authenticate(ctx context.Context, apiKey string) (merchant.Caller, error)
	// Reauthenticate checks the key of an open stream again, trusting the
	// cache only as far as the next check (merchant.Service.Reauthenticate).
	Reauthenticate(ctx context.Context, apiKey string, nextCheck time.Duration) (merchant.Caller, error)
}

func (e *edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := &requestState{id: requestID(r), remote: clientIP(r)}
	w.Header().Set("X-Request-Id", st.id)
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		span.SetAttributes(tracing.KeyRequestID.String(st.id))
	}
	sw := &statusWriter{ResponseWriter: w, st: st}
	defer e.logRequest(r, sw, st, start)
	// A stream's request lasts as long as the stream: its end releases it.
	defer func() { st.conn.release() }()
	r = r.WithContext(request.With(withState(r.Context(), st), st.id))
	if int64(len(r.URL.RawQuery)) > e.maxBody {
		// Before anything else: a GET carries its document in the URL, held
		// to the body's limit.
		writeError(sw, http.StatusRequestURITooLong, badRequest(codeRequestTooLarge, "",
			"the query string of the URL is longer than "+strconv.FormatInt(e.maxBody, 10)+
				" bytes; nothing was run. Send the document with POST"))
		return
	}
	if isPreflight(r) {
		e.preflight(sw, r, st)
		return
	}
	if status, err := e.admit(sw, r, st); err != nil {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", "Bearer")
		}
		e.refused(r.Context(), st, status, err)
		writeError(sw, status, err)
		return
	}
	e.next.ServeHTTP(sw, r)
}

// admit checks the request and reads what the GraphQL layer needs into st
// (and the body into r's context). A refusal comes with its HTTP status.
func (e *edge) admit(w http.ResponseWriter, r *http.Request, st *requestState) (int, *RequestError) {
	st.stream = streamOf(r)
	if st.origin = r.Header.Get("Origin"); st.origin != "" {
		st.sameOrigin = sameOrigin(st.origin, r)
	}
	if st.stream == streamWebsocket {
		if status, err := checkWebsocket(r); err != nil {
			return status, err
		}
	}
	switch r.Method {
	case http.MethodOptions:
		return 0, nil // answered by the Options transport; runs nothing
	case http.MethodGet:
	case http.MethodPost:
		if !isJSON(r.Header.Get("Content-Type")) {
			return http.StatusUnsupportedMediaType, badRequest(codeBadRequest, "Content-Type", "send the request as Content-Type: application/json")
		}
	default:
		return http.StatusMethodNotAllowed, badRequest(codeBadRequest, "", "use POST (or GET for queries)")
	}
	switch keys := r.Header.Values("Idempotency-Key"); len(keys) {
	case 0:
	case 1:
		st.hasHeaderKey, st.headerKey = true, unquote(strings.TrimSpace(keys[0]))
	default:
		return http.StatusBadRequest, badRequest(codeBadUserInput, "Idempotency-Key",
			"send at most one Idempotency-Key header; this request has "+strconv.Itoa(len(keys)))
	}
	if r.ContentLength > e.maxBody {
		return http.StatusRequestEntityTooLarge, tooLarge(e.maxBody)
	}

	ip := st.remote
	apiKey, hasKey := bearerKey(r, st)
	switch {
	case !hasKey && st.stream == streamWebsocket && st.authErr == errNoCredentials:
		// Browsers cannot set headers on a websocket: its key may come in
		// connection_init, where it is checked and counted (websocketInit).
		// The upgrade spends a token of the address, as a request does.
		if ok, wait := e.ipLimit.Allow(ip); !ok {
			return e.limited("ip", wait)
		}
	case !hasKey:
		// Unauthenticated traffic is rationed per client IP, before the body is read.
		e.metrics.Unauthenticated.Inc()
		if ok, wait := e.ipLimit.Allow(ip); !ok {
			return e.limited("ip", wait)
		}
		if st.authErr == errBadAuthHeader {
			e.log.WarnContext(r.Context(), "authentication failed", "request_id", st.id, "remote", ip, "reason", "malformed Authorization header")
		}
	default:
		if exhausted, wait := e.ipLimit.Exhausted(ip); exhausted {
			// This IP has used up its failures: no more key lookups for now.
			return e.limited("ip", wait)
		}
	}
	if st.stream != notStream {
		// Counted against the address before anything else is read, and
		// refused before the upgrade.
		c, refused := e.streams.open(r.Context(), st)
		if refused != nil {
			return e.capped(refused)
		}
		st.conn = c
		*r = *r.WithContext(c.ctx)
	}

	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, e.maxBody))
		if err != nil {
			return bodyError(err, e.maxBody)
		}
		*r = *r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
	}

	if hasKey {
		e.lookUp(r.Context(), st, apiKey)
		cors, status, err := e.checkOrigin(r.Context(), st)
		if err != nil {
			return status, err
		}
		if cors {
			// Before the merchant's ration: a page must be able to read its
			// RATE_LIMITED and the wait it names.
			allowCORS(w, st)
		}
		if status, err := e.browserStream(st); err != nil {
			return status, err
		}
		if status, err := e.ration(st); err != nil {
			return status, err
		}
		if refused := e.streams.admitMerchant(st.conn, st, originChecked(st)); refused != nil {
			return e.capped(refused)
		}
	} else if st.stream == streamWebsocket && st.origin != "" && !st.sameOrigin {
		if status, err := e.websocketOrigin(r.Context(), st); err != nil {
			return status, err
		}
	}
	if st.stream == streamSSE && st.authErr != nil {
		// An event stream starts with 200 and its headers: a refusal must
		// come before, as an HTTP status a client can act on.
		return refuseStream(st.authErr)
	}
	return 0, nil
}

// refused logs, at debug, why the edge refused a request: an operator
// sets LOG_LEVEL=debug to see it. The message is the answer's own, which
// quotes nothing the client sent.
func (e *edge) refused(ctx context.Context, st *requestState, status int, err *RequestError) {
	e.log.DebugContext(ctx, "request refused", "request_id", st.id, "remote", st.remote,
		"status", status, "code", err.Code, "field", err.Field, "reason", err.Message)
}

// browserStream spends a token of the client address for a stream opened
// with a publishable key: that key is public, so its streams are a
// browser's, counted per address as a request without a key is (a stream
// without a key spent one at its upgrade). A secret key's streams are the
// merchant's server's, rationed by the merchant's limit as its requests are.
func (e *edge) browserStream(st *requestState) (int, *RequestError) {
	if st.conn == nil || st.kind != merchant.KeyPublishable {
		return 0, nil
	}
	if ok, wait := e.ipLimit.Allow(st.remote); !ok {
		return e.limited("ip", wait)
	}
	return 0, nil
}

// authenticate looks apiKey up and rations the merchant it finds (lookUp,
// then ration).
func (e *edge) authenticate(ctx context.Context, st *requestState, apiKey string) (int, *RequestError) {
	e.lookUp(ctx, st, apiKey)
	return e.ration(st)
}

// ration refuses a request over its key kind's budgets: a secret key's
// requests spend the merchant's, a publishable key's their own, per merchant
// and per client address, so that the public key of a checkout page, which
// anyone can copy, never spends what the merchant's server needs.
func (e *edge) ration(st *requestState) (int, *RequestError) {
	if st.merchant == nil {
		return 0, nil
	}
	id := st.merchant.ID.String()
	if st.kind != merchant.KeyPublishable {
		if ok, wait := e.merchantLimit.Allow(id); !ok {
			return e.limited("merchant", wait)
		}
		return 0, nil
	}
	if exhausted, wait := e.publishableIP.Exhausted(st.remote); exhausted {
		return e.limited("publishable_ip", wait)
	}
	if ok, wait := e.publishable.Allow(id); !ok {
		return e.limited("publishable", wait)
	}
	if ok, wait := e.publishableIP.Allow(st.remote); !ok {
		return e.limited("publishable_ip", wait)
	}
	return 0, nil
}

// lookUp looks apiKey up, and records in st the merchant or why not. A
// failure spends one of the client address's tokens.
func (e *edge) lookUp(ctx context.Context, st *requestState, apiKey string) {
	lookupCtx, cancel := context.WithTimeout(ctx, e.authTimeout)
	c, err := e.merchants.Authenticate(lookupCtx, apiKey)
	cancel()
	switch {
	case err == nil:
		st.merchant, st.authErr = &c.Merchant, nil
		st.kind, st.keyID, st.seed = c.Kind, c.KeyID, merchant.SessionSeed(apiKey)
		st.apiKey = apiKey
	case payment.ErrorCode(err) == payment.EUNAUTHENTICATED:
		st.authErr = err
		e.metrics.Unauthenticated.Inc()
		e.ipLimit.Allow(st.remote) // a failure spends one of the IP's tokens
		e.log.WarnContext(ctx, "authentication failed", "request_id", st.id, "remote", st.remote, "reason", "unknown or revoked API key")
	default:
		// The database is away or failing: the resolvers answer with it.
		st.authErr = err
	}
}

func (e *edge) limited(scope string, wait time.Duration) (int, *RequestError) {
	e.metrics.RateLimited.WithLabelValues(scope).Inc()
	msg := "too many requests for this merchant"
	switch scope {
	case "ip":
		msg = "too many unauthenticated requests or browser streams from this address"
	case "publishable":
		msg = "too many requests with this merchant's publishable keys"
	case "publishable_ip":
		msg = "too many requests with publishable keys from this address"
	}
	return http.StatusTooManyRequests, &RequestError{Code: codeRateLimited, RetryAfter: wait,
		Message: msg + "; nothing was run. Retry after retryAfterMs, with the same idempotency key"}
}

// bearerKey reads the API key of "Authorization: Bearer <key>". A header of
// another form, or several, leaves st.authErr set.
func bearerKey(r *http.Request, st *requestState) (string, bool) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		st.authErr = errNoCredentials
		return "", false
	}
	key, ok := parseBearer(values[0])
	if len(values) > 1 || !ok {
		st.authErr = errBadAuthHeader
		return "", false
	}
	return key, true
}

// parseBearer reads the key of "Bearer <key>".
func parseBearer(value string) (string, bool) {
	scheme, key, ok := strings.Cut(value, " ")
	key = strings.TrimSpace(key)
	return key, ok && strings.EqualFold(scheme, "Bearer") && key != ""
}

// HeaderBytesAllowance is what a request's headers may take beside the
// query of its URL: a bearer key, cookies, tracing headers.
const HeaderBytesAllowance = 16 << 10

// MaxHeaderBytes is the http.Server's MaxHeaderBytes for the API with
// bodies bounded by maxBody: a URL whose query is as large as a body (over
// it, the edge answers 414) and ordinary headers beside it. Go's server
// answers a larger header 431 before it reads the rest.
func MaxHeaderBytes(maxBody int64) int { return int(maxBody) + HeaderBytesAllowance }

func tooLarge(limit int64) *RequestError {
	return badRequest(codeRequestTooLarge, "", "the request body is larger than "+strconv.FormatInt(limit, 10)+" bytes; nothing was run")
}

// bodyError answers a body that could not be read, without saying more than
// which of the limits it broke.
func bodyError(err error, limit int64) (int, *RequestError) {
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, tooLarge(limit)
	case errors.As(err, &netErr) && netErr.Timeout():
		return http.StatusRequestTimeout, badRequest(codeRequestTimeout, "", "the request body did not arrive in time; nothing was run")
	default:
		return http.StatusBadRequest, badRequest(codeBadUserInput, "", "the request body could not be read; nothing was run")
	}
}

// requestIDPattern is what a client's X-Request-Id may be; anything else is
// replaced, so the id is safe to log and to echo.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); requestIDPattern.MatchString(id) {
		return id
	}
	return uuid.NewString()
}

// clientIP is the key of the request's client in the per-address limits
// (ratelimit.ClientAddress: an IPv6 peer counts as its /64).
func clientIP(r *http.Request) string { return ratelimit.ClientAddress(r) }

// logRequest writes the access log line and times the request.
func (e *edge) logRequest(r *http.Request, sw *statusWriter, st *requestState, start time.Time) {
	elapsed := time.Since(start)
	status := cmp.Or(sw.status, http.StatusOK)
	operation, field, _, _ := st.snapshot()
	metrics.ObserveWithTrace(r.Context(), e.metrics.HTTPDuration.WithLabelValues(cmp.Or(field, "none"), strconv.Itoa(status)), elapsed.Seconds())
	attrs := []slog.Attr{
		slog.String("request_id", st.id),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
		slog.Int("bytes", sw.bytes),
		slog.String("remote", st.remote),
	}
	if st.merchant != nil {
		attrs = append(attrs, slog.String("merchant", st.merchant.Name), slog.String("key_kind", string(st.kind)))
	}
	if field != "" {
		attrs = append(attrs, slog.String("operation", cmp.Or(operation, "(anonymous)")), slog.String("field", field))
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	e.log.LogAttrs(r.Context(), level, "http request", attrs...)
}
