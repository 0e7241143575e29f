// Package stripeprovider charges cards through Stripe: a payment.Provider on
// Stripe's PaymentIntents API, with stripe-go. Each charge attempt is one
// PaymentIntent, created and confirmed in one call with our provider key as
// Stripe's Idempotency-Key, the same on every send, so that Stripe answers a
// repeat with the saved result of the first send instead of charging again.
// The attempt id in the PaymentIntent's metadata finds it again whatever
// became of the answer (FindCharge).
//
// 3-D Secure: chargeonce has no client-side step that could show the
// shopper their bank's challenge, so a PaymentIntent that requires action is
// cancelled at Stripe (it can then never be completed by anyone) and the
// attempt fails with authentication_required.
package stripeprovider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// APIBaseDefault is Stripe's own API.
const APIBaseDefault = stripe.APIURL

// TimeoutDefault bounds one call to Stripe when Config.Timeout is zero.
const TimeoutDefault = 10 * time.Second

// MetadataAttemptID is the PaymentIntent metadata key that holds the
// attempt's id: the lookup finds the attempt's PaymentIntent by it.
const MetadataAttemptID = "chargeonce_attempt_id"

// Config configures a Provider. Zero values take the defaults.
type Config struct {
	// SecretKey is the Stripe secret key (sk_test_…, sk_live_… or a
	// restricted key). It is sent to Stripe and nowhere else: never logged,
	// never in an error.
	SecretKey string
	// APIBase is Stripe's API, or stripe-mock, or a fake (default APIBaseDefault).
	APIBase string
	// Timeout bounds each call (default TimeoutDefault).
	Timeout time.Duration
	// Transport carries the requests (nil: the network, with connections
	// kept for bursts of checkouts).
	Transport http.RoundTripper
	// Logger gets what an operator must see (an idempotency_error, a request
	// Stripe refused); nil logs nothing.
	Logger *slog.Logger
}

// Provider is a payment.Provider on Stripe.
type Provider struct {
	client *stripe.Client
	secret string
	log    *slog.Logger
}

var _ payment.Provider = (*Provider)(nil)

// New returns a Provider for the Stripe account of cfg.SecretKey.
func New(cfg Config) *Provider {
	transport := cfg.Transport
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		transport = t
	}
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient: &http.Client{Timeout: cmp.Or(cfg.Timeout, TimeoutDefault), Transport: transport},
		URL:        stripe.String(cmp.Or(cfg.APIBase, APIBaseDefault)),
		// stripe-go's own retries would reuse our key (the header is set once
		// per request), but they sleep without heeding the context and retry
		// 409s and 5xx that chargeonce hands to its own retry loop and to the
		// reconciler, both of which send the same key again. So: off.
		MaxNetworkRetries: stripe.Int64(0),
		// stripe-go logs Stripe's raw error bodies; we log what we decide.
		LeveledLogger:   &stripe.LeveledLogger{Level: stripe.LevelNull},
		EnableTelemetry: stripe.Bool(false),
	})
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{
		client: stripe.NewClient(cfg.SecretKey, stripe.WithBackends(backends)),
		secret: cfg.SecretKey,
		log:    log.With("provider", "stripe"),
	}
}

// CreateCharge implements payment.Provider: it creates and confirms the
// attempt's PaymentIntent in one call, under our provider key.
func (p *Provider) CreateCharge(ctx context.Context, req payment.ProviderChargeRequest) (payment.ProviderCharge, error) {
	amount, refusal, ok := stripeAmount(req.Amount, req.Currency)
	if !ok {
		return refusal, nil
	}
	pi, err := p.client.V1PaymentIntents.Create(ctx, createParams(req, amount))
	if err != nil {
		return p.createFailed(ctx, req, err)
	}
	if replayed(pi.LastResponse) {
		// Stripe's saved answer to an earlier send: the PaymentIntent as it
		// was then. Read it as it is now.
		if pi, err = p.retrieve(ctx, pi.ID); err != nil {
			return payment.ProviderCharge{}, err
		}
	}
	return p.settle(ctx, req, pi)
}

// createParams is the create-and-confirm request of req: the same on every
// send, or Stripe refuses the repeat of our key (idempotency_error).
func createParams(req payment.ProviderChargeRequest, amount int64) *stripe.PaymentIntentCreateParams {
	metadata := maps.Clone(req.Metadata)
	if metadata == nil {
		metadata = map[string]string{}
	}
	metadata[MetadataAttemptID] = req.AttemptID.String()
	params := &stripe.PaymentIntentCreateParams{
		Amount:        stripe.Int64(amount),
		Currency:      stripe.String(currencyParam(req.Currency)),
		PaymentMethod: stripe.String(req.PaymentMethod),
		// Cards only: no payment method that redirects the shopper, which
		// this API could not bring back (and which would need a return_url).
		PaymentMethodTypes: stripe.StringSlice([]string{"card"}),
		Confirm:            stripe.Bool(true),
		Metadata:           metadata,
	}
	if req.Description != "" {
		params.Description = stripe.String(req.Description)
	}
	params.SetIdempotencyKey(req.IdempotencyKey)
	return params
}

// createFailed maps an error of the create call.
func (p *Provider) createFailed(ctx context.Context, req payment.ProviderChargeRequest, err error) (payment.ProviderCharge, error) {
	var se *stripe.Error
	if !errors.As(err, &se) {
		// A timeout, a refused or broken connection, an unreadable answer:
		// Stripe may have charged.
		return payment.ProviderCharge{}, p.unknown("create PaymentIntent", err)
	}
	status := se.HTTPStatusCode
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// Nothing was charged, but nothing can be until an operator fixes the
		// key: the attempt stays PROCESSING rather than fail every checkout.
		return payment.ProviderCharge{}, p.callFailed(ctx, "create PaymentIntent", err)
	case status >= 500 && replayed(se.LastResponse):
		// Stripe saved a 500 for our key and replays it: no send under this
		// key can ever charge. Find what Stripe holds for the attempt.
		return p.keySpent(ctx, req, err)
	case status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500:
		// 409 idempotency_key_in_use: a send under our key is still running.
		// 429, 5xx: Stripe may or may not have run it. Same key next time.
		return payment.ProviderCharge{}, p.unknown("create PaymentIntent", err)
	case se.Type == stripe.ErrorTypeIdempotency:
		return p.idempotencyError(ctx, req, se)
	case se.Type == stripe.ErrorTypeCard:
		return declined(piID(se.PaymentIntent), se), nil
	case se.Type == stripe.ErrorTypeInvalidRequest && (status == http.StatusBadRequest || status == http.StatusNotFound):
		return p.rejected(ctx, req, se), nil
	}
	return payment.ProviderCharge{}, p.unknown("create PaymentIntent", err)
}

// keySpent handles a replayed 500: the PaymentIntent for the attempt, if
// Stripe holds one, settles the attempt; only when it certainly holds none
// is the key spent, and settle may send the charge under a new key.
func (p *Provider) keySpent(ctx context.Context, req payment.ProviderChargeRequest, cause error) (payment.ProviderCharge, error) {
	pi, err := p.lookup(ctx, req)
	if err != nil {
		return payment.ProviderCharge{}, err
	}
	if pi != nil {
		return p.settle(ctx, req, pi)
	}
	return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: %s for provider key %s, and no PaymentIntent for attempt %s",
		payment.ErrProviderKeySpent, p.describe(cause), req.IdempotencyKey, req.AttemptID)
}

// idempotencyError handles Stripe's refusal of our key sent with other
// parameters than its first send. That is a bug, or a deploy that changed
// the request while attempts were open: it is logged as an error, and never
// retried under a new key. The attempt fails, unless Stripe holds a
// PaymentIntent for it from that first send, which then decides.
func (p *Provider) idempotencyError(ctx context.Context, req payment.ProviderChargeRequest, se *stripe.Error) (payment.ProviderCharge, error) {
	p.log.ErrorContext(ctx, "Stripe refused our provider key: it was first sent with other parameters; not sent again under a new key",
		"provider_key", req.IdempotencyKey, "attempt_id", req.AttemptID, "stripe_request_id", se.RequestID)
	pi, err := p.lookup(ctx, req)
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

// rejected maps a request Stripe refused as invalid: definitive, nothing
// was charged, and the same request would be refused again.
func (p *Provider) rejected(ctx context.Context, req payment.ProviderChargeRequest, se *stripe.Error) payment.ProviderCharge {
	p.log.WarnContext(ctx, "Stripe refused the charge request as invalid",
		"provider_key", req.IdempotencyKey, "stripe_code", se.Code, "stripe_param", se.Param, "stripe_request_id", se.RequestID)
	code := CodeProviderRejected
	switch {
	case se.Code == stripe.ErrorCodeAmountTooSmall || se.Code == stripe.ErrorCodeAmountTooLarge:
		code = string(se.Code)
	case se.Param == "currency":
		code = CodeCurrencyNotSupported
	case se.Param == "amount":
		code = CodeAmountNotSupported
	case se.Param == "payment_method" || se.Code == stripe.ErrorCodeResourceMissing:
		code = CodeInvalidPaymentMethod
	}
	return payment.ProviderCharge{FailureCode: code, FailureMessage: shopperMessage(code)}
}

// FindCharge implements payment.Provider: it finds the attempt's
// PaymentIntent by the attempt id in its metadata, whatever key it was
// created under, and reads it by id. A PaymentIntent that was created but
// never confirmed holds no charge: nil, and settle's re-send under the same
// key confirms it (see settle). Stripe's Search API is not used: it lags
// behind writes by up to a minute, so "not found" would prove nothing.
func (p *Provider) FindCharge(ctx context.Context, req payment.ProviderChargeRequest) (*payment.ProviderCharge, error) {
	pi, err := p.lookup(ctx, req)
	if err != nil || pi == nil {
		return nil, err
	}
	pc, err := p.outcome(ctx, req, pi)
	if errors.Is(err, errUnconfirmed) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &pc, nil
}

// retrieve reads a PaymentIntent by id, as it is now.
func (p *Provider) retrieve(ctx context.Context, id string) (*stripe.PaymentIntent, error) {
	pi, err := p.client.V1PaymentIntents.Retrieve(ctx, id, nil)
	if err != nil {
		return nil, p.callFailed(ctx, "retrieve PaymentIntent "+id, err)
	}
	return pi, nil
}

// replayed reports whether an answer is Stripe's saved answer to an earlier
// send under the same idempotency key.
func replayed(r *stripe.APIResponse) bool {
	return r != nil && r.Header.Get("Idempotent-Replayed") == "true"
}

// callFailed is the error of a call that got no usable answer: Stripe's
// refusal of our secret key, which an operator must fix (logged as an
// error, and no outcome-unknown: retrying will not help), or else an
// outcome-unknown error.
func (p *Provider) callFailed(ctx context.Context, op string, err error) error {
	var se *stripe.Error
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
	var se *stripe.Error
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

func piID(pi *stripe.PaymentIntent) string {
	if pi == nil {
		return ""
	}
	return pi.ID
}
