package graph

import (
	"context"
	"net/http"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"chargeonce/merchant"
	"chargeonce/payment"
)

// What a websocket's operations go through, each one as a request would:
// the socket's subscription cap, its API key checked again (through the
// cache of authentications, which every change of a key empties), the
// page's origin checked again, and the merchant's rate limit. And the
// re-check of every open stream's key and origin that Streams.Run does.

// streamOperations admits each operation of a websocket (each subscribe)
// before it runs; a refusal is that operation's typed error, and the socket
// and its other subscriptions stay up, unless the key or the origin was
// withdrawn: then the socket closes with 4403 after the refusal.
type streamOperations struct{ e *edge }

var (
	_ graphql.HandlerExtension     = streamOperations{}
	_ graphql.OperationInterceptor = streamOperations{}
)

func (streamOperations) ExtensionName() string                          { return "StreamOperations" }
func (streamOperations) Validate(schema graphql.ExecutableSchema) error { return nil }

func (o streamOperations) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	st := stateFrom(ctx)
	if st.stream != streamWebsocket || st.conn == nil {
		// An event stream carries one operation, admitted with its request.
		return next(ctx)
	}
	release, withdrawn, err := o.e.admitOperation(ctx, st)
	if err != nil {
		sent := false
		return func(context.Context) *graphql.Response {
			if !sent {
				sent = true
				return &graphql.Response{Errors: gqlerror.List{err.gqlError()}}
			}
			// After the refusal went out: the close follows it.
			if withdrawn != nil {
				st.conn.end(*withdrawn)
			}
			return nil
		}
	}
	// The operation's context ends with it, whatever ends it; the slot is
	// given back sooner when the subscription completes by itself, so that
	// a client that subscribes again at its complete finds it free.
	context.AfterFunc(ctx, release)
	responses := next(ctx)
	return func(ctx context.Context) *graphql.Response {
		r := responses(ctx)
		if r == nil {
			release()
		}
		return r
	}
}

// admitOperation admits an operation of st's websocket, and returns the
// function that gives its slot back. withdrawn is set when the socket must
// close after the refusal (its key or origin was withdrawn).
func (e *edge) admitOperation(ctx context.Context, st *requestState) (release func(), withdrawn *streamEnd, _ *RequestError) {
	release, ok := st.conn.takeSubscription()
	if !ok {
		e.metrics.RateLimited.WithLabelValues("subscriptions").Inc()
		return nil, nil, &RequestError{Code: codeRateLimited, RetryAfter: streamRetryAfter,
			Message: "this websocket carries " + strconv.Itoa(e.streams.cfg.MaxSubscriptions) +
				" subscriptions at once, the most one may; nothing was run. Complete one, or open another websocket, and subscribe again"}
	}
	refuse := func(why *streamEnd, err *RequestError) (func(), *streamEnd, *RequestError) {
		release()
		return nil, why, err
	}
	lookupCtx, cancel := context.WithTimeout(ctx, e.authTimeout)
	c, err := e.merchants.Authenticate(lookupCtx, st.apiKey)
	cancel()
	switch {
	case payment.ErrorCode(err) == payment.EUNAUTHENTICATED || (err == nil && !sameCaller(c, st)):
		e.metrics.Unauthenticated.Inc()
		e.log.WarnContext(ctx, "stream operation refused: the API key no longer authenticates", "request_id", st.id, "remote", st.remote)
		return refuse(&endRevoked, &RequestError{Code: errorCodes[payment.EUNAUTHENTICATED],
			Message: "the API key of this websocket no longer authenticates (revoked?); nothing was run, and the socket closes"})
	case err != nil:
		return refuse(nil, unavailable())
	}
	if _, _, oerr := e.checkOrigin(ctx, st); oerr != nil {
		if oerr.Code == codeServiceUnavailable {
			return refuse(nil, oerr)
		}
		return refuse(&endOriginRemoved, oerr)
	}
	if _, rerr := e.ration(st); rerr != nil {
		return refuse(nil, rerr)
	}
	return release, nil, nil
}

// sameCaller reports whether c is who st authenticated as.
func sameCaller(c merchant.Caller, st *requestState) bool {
	return st.merchant != nil && c.Merchant.ID == st.merchant.ID && c.KeyID == st.keyID
}

// recheckStream checks an open stream's key and origin again for
// Streams.RecheckOnce: why to end it, or nil. A cached authentication is
// trusted only if it stays within the cache's TTL until the next pass
// (merchant.Service.Reauthenticate).
func (e *edge) recheckStream(ctx context.Context, id *streamIdentity, p *recheckPass) *streamEnd {
	why, known := p.keys[id.apiKey]
	if !known {
		lookupCtx, cancel := context.WithTimeout(ctx, e.authTimeout)
		c, err := e.merchants.Reauthenticate(lookupCtx, id.apiKey, e.streams.cfg.RecheckInterval)
		cancel()
		switch {
		case payment.ErrorCode(err) == payment.EUNAUTHENTICATED:
			why = &endRevoked
		case err != nil:
			return nil // unknown: the next pass checks again; not remembered
		case c.Merchant.ID != id.merchantID || c.KeyID != id.keyID:
			why = &endRevoked
		}
		p.keys[id.apiKey] = why
	}
	if why != nil || id.origin == "" {
		return why
	}
	of := originOf{id.merchantID, id.origin}
	allowed, known := p.origins[of]
	if !known {
		lookupCtx, cancel := context.WithTimeout(ctx, e.authTimeout)
		ok, err := e.origins.OriginAllowed(lookupCtx, id.merchantID, id.origin)
		cancel()
		if err != nil {
			return nil
		}
		allowed = ok
		p.origins[of] = ok
	}
	if !allowed {
		return &endOriginRemoved
	}
	return nil
}

// originChecked says whether st's stream must be closed when its page's
// origin is no longer registered: a publishable key's, from another origin
// (checkOrigin admitted it for that origin).
func originChecked(st *requestState) bool {
	return st.origin != "" && !st.sameOrigin && st.kind == merchant.KeyPublishable
}

// capped answers a stream that a cap refused before it started: 429
// RATE_LIMITED, with the cap in the message.
func (e *edge) capped(r *streamRefusal) (int, *RequestError) {
	e.metrics.RateLimited.WithLabelValues(r.scope).Inc()
	return http.StatusTooManyRequests, &RequestError{Code: codeRateLimited, RetryAfter: streamRetryAfter, Message: r.message}
}
