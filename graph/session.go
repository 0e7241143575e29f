package graph

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"chargeonce/cardtesting"
	"chargeonce/graph/model"
	"chargeonce/merchant"
	"chargeonce/payment"
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
// publishable key must name one; its declines and guessed client secrets
// spend its client address's allowance against card testing (takeAllowance).
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
			CaptureMethod: captureMethod(input.CaptureMethod),
		})
		if err != nil {
			return nil, err
		}
		if res.Replay != nil {
			st.offerReplay(res.Replay)
		}
		return toPayload(res), nil
	}
	var ticket cardtesting.Ticket
	if publishable {
		if ticket, err = r.takeAllowance(st); err != nil {
			return nil, err
		}
	}
	in := payment.SessionCharge{PaymentMethod: input.PaymentMethod, Currency: input.Currency, OrderID: input.OrderID,
		Description: input.Description, ReturnURL: input.ReturnURL}
	if input.CaptureMethod != nil {
		m := captureMethod(input.CaptureMethod)
		in.CaptureMethod = &m
	}
	if input.Amount != nil {
		amount := int64(*input.Amount)
		in.Amount = &amount
	}
	res, err := r.Payments.ChargeCheckoutSession(ctx, m, keyScope(st), key, *input.CheckoutSession, in)
	switch {
	case err == nil && res.Status == payment.StatusFailed && !res.Replayed:
		ticket.Declined(ctx, m, st.keyID)
	case payment.ErrorCode(err) == payment.ENOTFOUND:
		ticket.Guessed() // the client secret names no session of the merchant
	default:
		ticket.Release()
	}
	if err != nil {
		return nil, err
	}
	return toPayload(res), nil
}

// keyScope is whose keys a request's idempotency key is among: a page's
// (a publishable key) are its session's own, so that a page can neither
// take a key the merchant's server will use nor learn which it used.
func keyScope(st *requestState) payment.KeyScope {
	if st.kind == merchant.KeyPublishable {
		return payment.SessionKeys
	}
	return payment.MerchantKeys
}

// takeAllowance takes one of the client address's allowance against card
// testing, before a publishable key's charge or lookup on a session runs:
// taken first, so that a wave of concurrent requests from one address
// passes no more than its burst. The caller settles the ticket.
func (r *Resolver) takeAllowance(st *requestState) (cardtesting.Ticket, error) {
	ticket, ok, wait := r.Declines.Take(st.remote)
	if !ok {
		st.answerWith(http.StatusTooManyRequests, wait)
		return ticket, &payment.Error{Code: payment.ELIMITED, RetryAfter: wait,
			Message: "too many declined charges or unknown checkout sessions from this address; nothing was run. Retry after retryAfterMs"}
	}
	return ticket, nil
}

// inSession reads the attempt of m's session that secret names under key,
// for chargeStatus and chargeUpdated; nil when the session has none. With
// a publishable key, a secret that names no session (a guess) spends the
// client address's allowance, as a decline does.
func (r *Resolver) inSession(ctx context.Context, m payment.Merchant, st *requestState, key, secret string) (*payment.Result, error) {
	var ticket cardtesting.Ticket
	if st.kind == merchant.KeyPublishable {
		var err error
		if ticket, err = r.takeAllowance(st); err != nil {
			return nil, err
		}
	}
	res, err := r.Payments.ChargeStatusInSession(ctx, m, keyScope(st), key, secret)
	if payment.ErrorCode(err) == payment.ENOTFOUND {
		ticket.Guessed()
	} else {
		ticket.Release()
	}
	return res, err
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
		res, err = r.inSession(ctx, m, st, key, *session)
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
		res, err := r.inSession(ctx, m, st, key, *session)
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

// watchScope is the session among whose keys a subscription's key is (see
// keyScope), once watchable has checked the session's secret; uuid.Nil for
// the merchant's own keys.
func watchScope(st *requestState, session *string) uuid.UUID {
	if session == nil || keyScope(st) != payment.SessionKeys {
		return uuid.Nil
	}
	return payment.SessionOf(*session)
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
		CaptureMethod: captureMethod(input.CaptureMethod),
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
