package graph

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"chargeonce/graph/model"
	"chargeonce/merchant"
	"chargeonce/payment"
	"chargeonce/ratelimit"
)

// The resolvers' share of the key kinds: what a publishable key may run
// beyond the operation-level rule (checkKeyKind), and the card-testing
// defence of its charges.

// caller returns the authenticated merchant of the request and its key's kind.
func (r *Resolver) caller(ctx context.Context) (payment.Merchant, *requestState, error) {
	m, err := r.merchant(ctx)
	return m, stateFrom(ctx), err
}

// requireSecret refuses a publishable key.
func requireSecret(st *requestState, what string) error {
	if st.kind == merchant.KeyPublishable {
		st.answerWith(http.StatusForbidden, 0)
		return payment.Errorf(payment.EFORBIDDEN, "%s needs a secret key (co_sk_…), on the merchant's server", what)
	}
	return nil
}

// chargeCard charges in, on a checkout session when it names one. A
// publishable key must name one; its declines are rationed, per key and per
// client address, against card testing.
func (r *Resolver) chargeCard(ctx context.Context, key string, input model.ChargeCardInput) (*model.ChargeCardPayload, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	publishable := st.kind == merchant.KeyPublishable
	if input.CheckoutSession == nil {
		if publishable {
			st.answerWith(http.StatusForbidden, 0)
			return nil, errNeedsSession
		}
		if input.Amount == nil {
			return nil, payment.Invalid("input.amount", "amount is required without checkoutSession")
		}
		if input.Currency == nil {
			return nil, payment.Invalid("input.currency", "currency is required without checkoutSession")
		}
		res, err := r.Payments.ChargeCard(ctx, m, key, payment.ChargeInput{
			Amount:        int64(*input.Amount),
			Currency:      *input.Currency,
			PaymentMethod: input.PaymentMethod,
			OrderID:       deref(input.OrderID),
			Description:   deref(input.Description),
			ReturnURL:     deref(input.ReturnURL),
		})
		if err != nil {
			return nil, err
		}
		return toPayload(res), nil
	}
	if publishable {
		if err := r.declinesLeft(st); err != nil {
			return nil, err
		}
	}
	in := payment.SessionCharge{PaymentMethod: input.PaymentMethod, Currency: input.Currency, OrderID: input.OrderID,
		Description: input.Description, ReturnURL: input.ReturnURL}
	if input.Amount != nil {
		amount := int64(*input.Amount)
		in.Amount = &amount
	}
	res, err := r.Payments.ChargeCheckoutSession(ctx, m, key, *input.CheckoutSession, in)
	if publishable {
		r.countDecline(st, res, err)
	}
	if err != nil {
		return nil, err
	}
	return toPayload(res), nil
}

// declinesLeft refuses a publishable key's charge while its key or its
// client address has used up its declines.
func (r *Resolver) declinesLeft(st *requestState) error {
	for _, scope := range r.declineScopes(st) {
		if exhausted, wait := scope.limit.Exhausted(scope.key); exhausted {
			r.Metrics.RateLimited.WithLabelValues("declines_" + scope.name).Inc()
			st.answerWith(http.StatusTooManyRequests, wait)
			return &payment.Error{Code: payment.ELIMITED, RetryAfter: wait,
				Message: "too many declined charges from this publishable key or address; nothing was run. Retry after retryAfterMs"}
		}
	}
	return nil
}

// countDecline spends a token of the key and of the client address for a
// fresh decline, or for a client secret that names no session (guessing).
func (r *Resolver) countDecline(st *requestState, res payment.Result, err error) {
	fresh := err == nil && res.Status == payment.StatusFailed && !res.Replayed
	guessed := payment.ErrorCode(err) == payment.ENOTFOUND
	if !fresh && !guessed {
		return
	}
	for _, scope := range r.declineScopes(st) {
		scope.limit.Allow(scope.key)
		r.Metrics.Declines.WithLabelValues(scope.name).Inc()
	}
}

type declineScope struct {
	name, key string
	limit     *ratelimit.Limiter
}

// declineScopes are what a publishable key's declines are counted against.
func (r *Resolver) declineScopes(st *requestState) []declineScope {
	return []declineScope{{"key", st.keyID.String(), r.KeyDeclines}, {"ip", st.remote, r.IPDeclines}}
}

// chargeStatus answers chargeStatus, only for the session's attempts when
// the request names a session (as a publishable key must).
func (r *Resolver) chargeStatus(ctx context.Context, key string, session *string) (*model.ChargeCardPayload, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	var res *payment.Result
	switch {
	case session != nil:
		res, err = r.Payments.ChargeStatusInSession(ctx, m, key, *session)
	case st.kind == merchant.KeyPublishable:
		st.answerWith(http.StatusForbidden, 0)
		return nil, errNeedsSession
	default:
		res, err = r.Payments.ChargeStatus(ctx, m, key)
	}
	if err != nil || res == nil {
		return nil, err
	}
	return toPayload(*res), nil
}

// watchable checks that a subscription may watch key: with a session, only
// an attempt of that session (as a publishable key must); the attempt's
// session never changes, so once is enough.
func (r *Resolver) watchable(ctx context.Context, m payment.Merchant, st *requestState, key string, session *string) error {
	switch {
	case session != nil:
		res, err := r.Payments.ChargeStatusInSession(ctx, m, key, *session)
		if err != nil {
			return err
		}
		if res == nil {
			return payment.Errorf(payment.ENOTFOUND, "no charge attempt of this checkout session has this idempotency key")
		}
	case st.kind == merchant.KeyPublishable:
		return errNeedsSession
	}
	return nil
}

// createCheckoutSession creates a session with a secret key.
func (r *Resolver) createCheckoutSession(ctx context.Context, key string, input model.CheckoutSessionInput) (*model.CheckoutSessionPayload, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireSecret(st, "createCheckoutSession"); err != nil {
		return nil, err
	}
	in := payment.SessionInput{
		Amount: int64(input.Amount), Currency: input.Currency, OrderID: deref(input.OrderID),
		Description: deref(input.Description), ReturnURL: deref(input.ReturnURL),
	}
	if input.ExpiresInSeconds != nil {
		if *input.ExpiresInSeconds <= 0 {
			return nil, payment.Invalid("input.expiresInSeconds", "expiresInSeconds must be between 1 and %d; got %d",
				int(payment.SessionExpiresInMax/time.Second), *input.ExpiresInSeconds)
		}
		in.ExpiresIn = time.Duration(*input.ExpiresInSeconds) * time.Second
	}
	if err := r.returnOrigin(ctx, m, in.ReturnURL); err != nil {
		return nil, err
	}
	res, err := r.Payments.CreateCheckoutSession(ctx, m, st.seed, key, in)
	if err != nil {
		return nil, err
	}
	return &model.CheckoutSessionPayload{IdempotencyKey: res.IdempotencyKey, Replayed: res.Replayed,
		Session: toSession(res.Session, res.ClientSecret)}, nil
}

// returnOrigin refuses a session's returnUrl that is not on one of the
// merchant's registered origins: the provider sends the shopper there with
// the attempt's key, so it must be the merchant's own checkout.
func (r *Resolver) returnOrigin(ctx context.Context, m payment.Merchant, returnURL string) error {
	if returnURL == "" {
		return nil
	}
	if err := r.Payments.ValidateReturnURL("input.returnUrl", returnURL); err != nil {
		return err
	}
	u, _ := url.Parse(returnURL) // valid: checked above
	origin, err := merchant.NormalizeOrigin(u.Scheme + "://" + u.Host)
	if err != nil {
		return payment.Invalid("input.returnUrl", "returnUrl's origin is not a valid origin: %v", err)
	}
	ok, err := r.Merchants.OriginAllowed(ctx, m.ID, origin)
	if err != nil {
		return err
	}
	if !ok {
		return payment.Invalid("input.returnUrl", "returnUrl's origin %s is not one of this merchant's registered origins; nothing was created. Register it with: chargeonce merchant origins add %s %s", origin, m.Name, origin)
	}
	return nil
}

// checkoutSession reads a session back, with a secret key.
func (r *Resolver) checkoutSession(ctx context.Context, id string) (*model.CheckoutSession, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireSecret(st, "checkoutSession"); err != nil {
		return nil, err
	}
	sid, perr := uuid.Parse(id)
	if perr != nil {
		return nil, payment.Invalid("id", "a checkout session's id is a UUID; got %q", id)
	}
	s, err := r.Payments.CheckoutSession(ctx, m, sid)
	if err != nil || s == nil {
		return nil, err
	}
	return toSession(*s, ""), nil
}
