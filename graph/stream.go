package graph

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"

	"chargeonce/payment"
)

// The streaming transports of /graphql, for the chargeUpdated subscription:
// websockets with the graphql-transport-ws subprotocol, and server-sent
// events (POST with Accept: text/event-stream). They carry subscriptions
// only: a query or a mutation sent over them is refused, so that every
// charge goes over POST, through the Idempotency-Key header, the body limit
// and the per-request rate limit (see operationLimits).

// streamKind is the transport a request asked for.
type streamKind int

const (
	notStream streamKind = iota
	streamWebsocket
	streamSSE
)

const (
	// wsSubprotocol is the one websocket protocol served.
	wsSubprotocol = "graphql-transport-ws"
	// wsPingInterval is how often the server pings a websocket; a client that
	// does not answer within twice that is cut off.
	wsPingInterval = 20 * time.Second
	// wsInitTimeout is how long a websocket may stay open without connection_init.
	wsInitTimeout = 10 * time.Second
	// sseKeepAlive is how often a quiet event stream gets a comment line,
	// which keeps proxies from closing it.
	sseKeepAlive = 20 * time.Second
	// streamWriteTimeout bounds one write to a stream: a client that stops
	// reading is cut off rather than holding a goroutine for good.
	streamWriteTimeout = 30 * time.Second
	// wsReadLimit bounds a websocket message from the client; a subscribe
	// message is far smaller.
	wsReadLimit = 16 << 10
)

// Close codes of a websocket whose connection_init is refused, as the
// graphql-transport-ws protocol and RFC 6455 name them.
const (
	closeForbidden       = 4403 // no valid API key
	closeTooManyRequests = 4429 // the client address or the merchant is over its rate limit
	closeTryAgainLater   = 1013 // the key could not be checked: the database is away
)

// streamOf says which streaming transport r asks for, if any.
func streamOf(r *http.Request) streamKind {
	switch {
	case r.Header.Get("Upgrade") != "":
		return streamWebsocket
	case r.Method == http.MethodPost && wantsEventStream(r.Header.Values("Accept")):
		return streamSSE
	}
	return notStream
}

// wantsEventStream reports whether an Accept header asks for an event
// stream rather than a JSON answer: it names text/event-stream and no JSON
// type. Clients such as urql list text/event-stream beside JSON on every
// request, queries and mutations too, which must keep getting JSON.
func wantsEventStream(accept []string) bool {
	stream := false
	for _, v := range accept {
		for part := range strings.SplitSeq(v, ",") {
			mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mediaType {
			case "text/event-stream":
				stream = true
			case "application/json", "application/graphql-response+json", "application/graphql+json":
				return false
			}
		}
	}
	return stream
}

// checkWebsocket refuses an upgrade that is not a same-origin websocket
// speaking graphql-transport-ws, with an error of our shape (the websocket
// library's own refusals are plain text).
func checkWebsocket(r *http.Request) (int, *RequestError) {
	if !headerHasToken(r.Header, "Upgrade", "websocket") || !headerHasToken(r.Header, "Connection", "upgrade") {
		return http.StatusBadRequest, badRequest(codeBadRequest, "Upgrade",
			"the only protocol upgrade served is a websocket with the graphql-transport-ws subprotocol")
	}
	if r.Method != http.MethodGet {
		return http.StatusMethodNotAllowed, badRequest(codeBadRequest, "", "open a websocket with GET")
	}
	if !headerHasToken(r.Header, "Sec-WebSocket-Protocol", wsSubprotocol) {
		return http.StatusBadRequest, badRequest(codeBadRequest, "Sec-WebSocket-Protocol",
			"offer the graphql-transport-ws subprotocol; it is the only one served")
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" || len(r.Header.Values("Sec-WebSocket-Key")) != 1 {
		return http.StatusBadRequest, badRequest(codeBadRequest, "", "not a websocket handshake (RFC 6455, version 13)")
	}
	// The Origin is the edge's to check (checkOrigin, websocketOrigin): a
	// page of another origin reaches a websocket only with a publishable
	// key, from an origin its merchant registered.
	return 0, nil
}

// headerHasToken reports whether a comma-separated header holds token.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// websocketTransport is gqlgen's websocket transport, with the API key read
// from connection_init when the upgrade carried none.
func (e *edge) websocketTransport() transport.Websocket {
	limit := int64(wsReadLimit)
	return transport.Websocket{
		Implementation: upgradeCapture{transport.CoderWebsocketImplementation{AcceptOptions: websocket.AcceptOptions{
			Subprotocols: []string{wsSubprotocol}, // chosen first; the edge requires the client to offer it
			// The edge has checked the Origin before the upgrade (its own,
			// or one a merchant registered: websocketOrigin, checkOrigin),
			// which the library's same-host rule cannot express.
			InsecureSkipVerify: true,
		}}},
		InitFunc:         e.websocketInit,
		InitTimeout:      wsInitTimeout,
		PingPongInterval: wsPingInterval,
		PayloadReadLimit: &limit,
	}
}

// websocketInit authenticates a websocket at its connection_init: by the
// Authorization header of the upgrade when it had one (the edge checked it
// then), else by the payload's "authorization": "Bearer <api key>", since
// browsers cannot set headers on a websocket. A refusal closes the socket
// with 4403 (no valid key), 4429 (rate limited) or 1013 (the key could not be
// checked), or 4429 when the merchant holds its most streams. An accepted
// socket lives until the client leaves, its lifetime ends, its key or
// origin is withdrawn, or the server shuts down (Streams).
func (e *edge) websocketInit(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	st := stateFrom(ctx)
	if st.merchant == nil && st.authErr == errNoCredentials {
		if _, err := e.authenticateInit(ctx, st, payload.Authorization()); err != nil {
			return closeWith(ctx, closeTooManyRequests, "Too many requests"), nil, err
		}
	}
	if st.merchant != nil {
		if _, _, err := e.checkOrigin(ctx, st); err != nil {
			if err.Code == codeServiceUnavailable {
				return closeWith(ctx, closeTryAgainLater, "Try again later"), nil, errors.New(err.Message)
			}
			return closeWith(ctx, closeForbidden, "Forbidden"), nil, errors.New(err.Message)
		}
	}
	switch {
	case st.merchant != nil:
	case payment.ErrorCode(st.authErr) == payment.EUNAUTHENTICATED:
		return closeWith(ctx, closeForbidden, "Forbidden"), nil, st.authErr
	default:
		return closeWith(ctx, closeTryAgainLater, "Try again later"), nil, errors.New("the API key could not be checked")
	}
	if refused := e.streams.admitMerchant(st.conn, st, originChecked(st)); refused != nil {
		e.metrics.RateLimited.WithLabelValues(refused.scope).Inc()
		return closeWith(ctx, closeTooManyRequests, "Too many streams"), nil, refused
	}
	return ctx, nil, nil
}

func closeWith(ctx context.Context, code int, reason string) context.Context {
	return transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, code), reason)
}

// errNoLiveStatus answers a subscription on a handler built without a hub.
var errNoLiveStatus = errors.New("live status is not configured")

var errBadInitAuth = payment.Errorf(payment.EUNAUTHENTICATED,
	`send the API key in connection_init: {"authorization": "Bearer <api key>"}, or as the header Authorization: Bearer <api key>`)

// authenticateInit checks the authorization value of a connection_init, and
// counts it as the edge counts a request's header: a missing or malformed
// one spends a token of the client address, and so does a key that fails.
func (e *edge) authenticateInit(ctx context.Context, st *requestState, authorization string) (int, *RequestError) {
	apiKey, ok := parseBearer(authorization)
	if !ok {
		e.metrics.Unauthenticated.Inc()
		st.authErr = errBadInitAuth
		if allowed, wait := e.ipLimit.Allow(st.remote); !allowed {
			return e.limited("ip", wait)
		}
		reason := "no API key in connection_init"
		if authorization != "" {
			reason = "malformed authorization in connection_init"
		}
		e.log.WarnContext(ctx, "authentication failed", "request_id", st.id, "remote", st.remote, "reason", reason)
		return 0, nil
	}
	if exhausted, wait := e.ipLimit.Exhausted(st.remote); exhausted {
		return e.limited("ip", wait)
	}
	return e.authenticate(ctx, st, apiKey)
}

// sseTransport is gqlgen's server-sent events transport behind the edge:
// it gets the body the edge has read and checked, write deadlines per event
// instead of the server's one deadline per request, and the stream's
// context, which the server ends at its shutdown, the stream's lifetime or
// the withdrawal of its key or origin.
type sseTransport struct {
	sse transport.SSE
}

func (t sseTransport) Supports(r *http.Request) bool {
	return streamOf(r) == streamSSE && isJSON(r.Header.Get("Content-Type"))
}

func (t sseTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	body, _ := r.Context().Value(bodyKey{}).([]byte)
	if _, err := DecodeRequest(body); err != nil {
		// gqlgen's own answer to a bad body quotes it.
		var rerr *RequestError
		errors.As(err, &rerr)
		writeError(w, http.StatusBadRequest, rerr)
		return
	}
	// The stream's context (the edge's streamConn): its end ends the stream.
	ctx := r.Context()
	r.Body = io.NopCloser(bytes.NewReader(body))
	rc := http.NewResponseController(w)
	// The server's read timeout covers a request, not a stream that lasts:
	// past it, the connection's reader would end the stream.
	_ = rc.SetReadDeadline(time.Time{})
	t.sse.Do(&streamWriter{ResponseWriter: w, rc: rc, ctx: ctx}, r, exec)
}

// streamWriter gives each write to an event stream a deadline of its own,
// and writes nothing once the stream's context has ended: a stream that the
// server's shutdown cut short ends without the "complete" event, so that its
// client knows to ask again.
type streamWriter struct {
	http.ResponseWriter
	rc  *http.ResponseController
	ctx context.Context
}

var errStreamEnded = errors.New("the stream has ended")

func (w *streamWriter) Write(b []byte) (int, error) {
	if w.ctx.Err() != nil {
		return 0, errStreamEnded
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	return w.ResponseWriter.Write(b)
}

func (w *streamWriter) Flush() {
	if w.ctx.Err() == nil {
		_ = w.rc.Flush()
	}
}

func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// refuseStream answers an event stream whose API key failed before the
// stream starts: 401 UNAUTHENTICATED, or 503 when the key could not be checked.
func refuseStream(err error) (int, *RequestError) {
	var domain *payment.Error
	if errors.As(err, &domain) && domain.Code == payment.EUNAUTHENTICATED {
		return http.StatusUnauthorized, &RequestError{Code: errorCodes[payment.EUNAUTHENTICATED], Message: domain.Message}
	}
	return http.StatusServiceUnavailable, &RequestError{Code: codeServiceUnavailable, RetryAfter: payment.UnavailableRetryAfter,
		Message: "the API key could not be checked: the payment database is unavailable. Subscribe again after retryAfterMs"}
}
