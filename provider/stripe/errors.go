package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// Stripe's errors, mapped to an attempt's outcome, and described for logs
// and errors without Stripe's message text or our secret key.

// verdict is what an error of a create call (a PaymentIntent's, a
// refund's) says of what Stripe did with it.
type verdict int

const (
	// verdictUnknown: a timeout, a refused or broken connection, an
	// unreadable answer, 409 idempotency_key_in_use (a send under our key
	// is still running), 429, a 5xx: Stripe may or may not have run it.
	// Same key next time.
	verdictUnknown verdict = iota
	// verdictKeyRefused: 401 or 403. Nothing was run, but nothing can be
	// until an operator fixes the secret key.
	verdictKeyRefused
	// verdictKeySpent: Stripe saved a 500 for our key and replays it: no
	// send under this key can ever run.
	verdictKeySpent
	// verdictIdempotency: Stripe refused our key, first sent with other
	// parameters.
	verdictIdempotency
	// verdictDeclined: a card error (402).
	verdictDeclined
	// verdictRejected: a 400 or 404 invalid_request_error: definitive,
	// nothing was done, and the same request would be refused again.
	verdictRejected
)

// classify is the verdict of an error of a create call, and Stripe's
// error when it answered with one.
func classify(err error) (verdict, *stripego.Error) {
	var se *stripego.Error
	if !errors.As(err, &se) {
		return verdictUnknown, nil
	}
	status := se.HTTPStatusCode
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return verdictKeyRefused, se
	case status >= 500 && replayed(se.LastResponse):
		return verdictKeySpent, se
	case status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500:
		return verdictUnknown, se
	case se.Type == stripego.ErrorTypeIdempotency:
		return verdictIdempotency, se
	case se.Type == stripego.ErrorTypeCard:
		return verdictDeclined, se
	case se.Type == stripego.ErrorTypeInvalidRequest && (status == http.StatusBadRequest || status == http.StatusNotFound):
		return verdictRejected, se
	}
	return verdictUnknown, se
}

// createFailed maps an error of the create call.
func (p *Provider) createFailed(ctx context.Context, req payment.ProviderChargeRequest, err error) (payment.ProviderCharge, error) {
	v, se := classify(err)
	switch v {
	case verdictKeyRefused:
		// Nothing was charged: the attempt stays PROCESSING rather than fail
		// every checkout.
		return payment.ProviderCharge{}, p.callFailed(ctx, "create PaymentIntent", err)
	case verdictKeySpent:
		// Find what Stripe holds for the attempt.
		return p.keySpent(ctx, req, err)
	case verdictIdempotency:
		return p.idempotencyError(ctx, req, se)
	case verdictDeclined:
		return declined(piID(se.PaymentIntent), se), nil
	case verdictRejected:
		return p.rejected(ctx, req, se), nil
	}
	// Stripe may have charged.
	return payment.ProviderCharge{}, p.unknown("create PaymentIntent", err)
}

// keySpent handles a replayed 500: the PaymentIntent for the attempt, if
// Stripe holds one, settles the attempt; only when it certainly holds none
// is the key spent, and settle may send the charge under a new key.
func (p *Provider) keySpent(ctx context.Context, req payment.ProviderChargeRequest, cause error) (payment.ProviderCharge, error) {
	pi, err := p.theIntent(ctx, req)
	if err != nil {
		return payment.ProviderCharge{}, err
	}
	if pi != nil {
		return p.settle(ctx, req, pi)
	}
	return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: %s for provider key %s, and no PaymentIntent for attempt %s",
		payment.ErrProviderKeySpent, p.describe(cause), req.IdempotencyKey, req.AttemptID)
}

// theIntent is the attempt's one PaymentIntent, for a create that Stripe
// cannot answer itself; nil when it holds none. Several are not this
// adapter's to choose among: the outcome is left unknown, and payment's
// lookup (FindCharges) settles on one of their charges.
func (p *Provider) theIntent(ctx context.Context, req payment.ProviderChargeRequest) (*stripego.PaymentIntent, error) {
	intents, err := p.lookup(ctx, req)
	switch {
	case err != nil:
		return nil, err
	case len(intents) > 1:
		return nil, fmt.Errorf("%w: stripe: %d PaymentIntents for attempt %s", payment.ErrOutcomeUnknown, len(intents), req.AttemptID)
	case len(intents) == 1:
		return intents[0], nil
	}
	return nil, nil
}

// idempotencyError handles Stripe's refusal of our key sent with other
// parameters than its first send. That is a bug, or a deploy that changed
// the request while attempts were open: it is logged as an error, and never
// retried under a new key. The attempt fails, unless Stripe holds a
// PaymentIntent for it from that first send, which then decides.
func (p *Provider) idempotencyError(ctx context.Context, req payment.ProviderChargeRequest, se *stripego.Error) (payment.ProviderCharge, error) {
	p.log.ErrorContext(ctx, "Stripe refused our provider key: it was first sent with other parameters; not sent again under a new key",
		"provider_key", req.IdempotencyKey, "attempt_id", req.AttemptID, "stripe_request_id", se.RequestID)
	pi, err := p.theIntent(ctx, req)
	if err != nil {
		return payment.ProviderCharge{}, err
	}
	if pi != nil {
		pc, err := p.outcome(ctx, req, pi)
		if !errors.Is(err, errUnconfirmed) {
			return pc, err
		}
	}
	return payment.ProviderCharge{FailureCode: CodeIdempotencyError, FailureMessage: messageIdempotencyError}, nil
}

// readAfterRefusal handles the error err of a send on PaymentIntent id (a
// capture's, a void's) under our provider key. With no usable answer it is
// an error: outcome unknown, or the secret key refused. When Stripe
// refused the send for good, it reads the PaymentIntent as it is now, for
// the caller to see whether the send's work was done after all (by a send
// whose answer was lost), with Stripe's error and its verdict.
func (p *Provider) readAfterRefusal(ctx context.Context, op, id string, err error) (verdict, *stripego.Error, *stripego.PaymentIntent, error) {
	v, se := classify(err)
	switch v {
	case verdictKeyRefused:
		return v, se, nil, p.callFailed(ctx, op, err)
	case verdictUnknown:
		return v, se, nil, p.unknown(op, err)
	}
	pi, err := p.retrieve(ctx, id)
	return v, se, pi, err
}

// keyRefused is the error of a send on a PaymentIntent whose work was not
// done when Stripe refused our key: spent (ErrProviderKeySpent), or first
// sent with other parameters, a bug or a deploy that changed the request
// while it was open (logged; never sent again under a new key, and no
// failure on a guess). Nil for any other refusal.
func (p *Provider) keyRefused(ctx context.Context, v verdict, se *stripego.Error, op string, err error, key string, attempt uuid.UUID) error {
	switch v {
	case verdictKeySpent:
		return fmt.Errorf("%w: stripe: %s: %s for provider key %s, and it was not done", payment.ErrProviderKeySpent, op, p.describe(err), key)
	case verdictIdempotency:
		p.log.ErrorContext(ctx, "Stripe refused our provider key: it was first sent with other parameters; not sent again under a new key",
			"operation", op, "provider_key", key, "attempt_id", attempt, "stripe_request_id", se.RequestID)
		return fmt.Errorf("stripe: %s: %s: provider key %s was first sent with other parameters", op, p.describe(err), key)
	}
	return nil
}

// rejected maps a request Stripe refused as invalid: definitive, nothing
// was charged, and the same request would be refused again.
func (p *Provider) rejected(ctx context.Context, req payment.ProviderChargeRequest, se *stripego.Error) payment.ProviderCharge {
	p.log.WarnContext(ctx, "Stripe refused the charge request as invalid",
		"provider_key", req.IdempotencyKey, "stripe_code", se.Code, "stripe_param", se.Param, "stripe_request_id", se.RequestID)
	code := CodeProviderRejected
	switch {
	case se.Code == stripego.ErrorCodeAmountTooSmall || se.Code == stripego.ErrorCodeAmountTooLarge:
		code = string(se.Code)
	case se.Param == "currency":
		code = CodeCurrencyNotSupported
	case se.Param == "amount":
		code = CodeAmountNotSupported
	case se.Param == "payment_method" || se.Code == stripego.ErrorCodeResourceMissing:
		code = CodeInvalidPaymentMethod
	}
	return payment.ProviderCharge{FailureCode: code, FailureMessage: shopperMessage(code)}
}

// callFailed is the error of a call that got no usable answer: Stripe's
// refusal of our secret key, which an operator must fix (logged as an
// error, and no outcome-unknown: retrying will not help), or else an
// outcome-unknown error.
func (p *Provider) callFailed(ctx context.Context, op string, err error) error {
	var se *stripego.Error
	if errors.As(err, &se) && (se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden) {
		p.log.ErrorContext(ctx, "Stripe refused our secret key; check STRIPE_SECRET_KEY",
			"operation", op, "status", se.HTTPStatusCode, "stripe_request_id", se.RequestID)
		return fmt.Errorf("stripe: %s: %s: Stripe refused the secret key", op, p.describe(err))
	}
	return p.unknown(op, err)
}

// unknown is an outcome-unknown error for a failed call.
func (p *Provider) unknown(op string, err error) error {
	return fmt.Errorf("%w: stripe: %s: %s", payment.ErrOutcomeUnknown, op, p.describe(err))
}

// describe says what went wrong in a call, for logs and errors: Stripe's
// status, error type and code and request id, never its message text (which
// may quote what we sent); for anything else the error, with the secret key
// cut out wherever it appears.
func (p *Provider) describe(err error) string {
	var se *stripego.Error
	if errors.As(err, &se) {
		var b strings.Builder
		fmt.Fprintf(&b, "Stripe answered %d", se.HTTPStatusCode)
		if se.Type != "" {
			fmt.Fprintf(&b, " %s", se.Type)
		}
		if se.Code != "" {
			fmt.Fprintf(&b, " (%s)", se.Code)
		}
		if replayed(se.LastResponse) {
			b.WriteString(", replayed")
		}
		if se.RequestID != "" {
			fmt.Fprintf(&b, ", request %s", se.RequestID)
		}
		return b.String()
	}
	return p.redact(err.Error())
}

// redact cuts the secret key out of s.
func (p *Provider) redact(s string) string {
	if p.secret == "" {
		return s
	}
	return strings.ReplaceAll(s, p.secret, "[STRIPE_SECRET_KEY]")
}
