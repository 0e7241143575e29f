// Package stripe charges cards through Stripe: a payment.Provider on
// Stripe's PaymentIntents API, with stripe-go (imported as stripego). Each
// charge attempt is one PaymentIntent, created and confirmed in one call
// with our provider key as Stripe's Idempotency-Key, the same on every send,
// so that Stripe answers a repeat with the saved result of the first send
// instead of charging again; the attempt id in the PaymentIntent's metadata
// finds it again whatever became of the answer (FindCharges). A card that
// requires 3-D Secure waits for the shopper at the bank's page when the
// charge has a return URL, and is read, or cancelled as abandoned, until it
// ends (authentication.go); without one it fails with
// authentication_required, its PaymentIntent cancelled. A refund attempt
// is one Refund of the charge's PaymentIntent under its own provider key,
// found again by its attempt id and never sent to be found (refund.go). A
// charge made with payment.CaptureManual only authorizes
// (authorization.go); its captures (capture.go) and its void (void.go) are
// calls on its PaymentIntent under their own provider keys, found again by
// reading it. Stripe's webhook events only make chargeonce read an attempt
// at once (webhook.go).
package stripe

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"time"

	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// APIBaseDefault is Stripe's own API.
const APIBaseDefault = stripego.APIURL

// TimeoutDefault bounds one call to Stripe when Config.Timeout is zero.
const TimeoutDefault = 10 * time.Second

// MetadataAttemptID is the PaymentIntent and refund metadata key that
// holds the attempt's id: the lookups find the attempt's PaymentIntent, or
// refund, by it.
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
	client *stripego.Client
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
	backends := stripego.NewBackendsWithConfig(&stripego.BackendConfig{
		HTTPClient: &http.Client{Timeout: cmp.Or(cfg.Timeout, TimeoutDefault), Transport: transport},
		URL:        stripego.String(cmp.Or(cfg.APIBase, APIBaseDefault)),
		// stripe-go's own retries would reuse our key (the header is set once
		// per request), but they sleep without heeding the context and retry
		// 409s and 5xx that chargeonce hands to its own retry loop and to the
		// reconciler, both of which send the same key again. So: off.
		MaxNetworkRetries: stripego.Int64(0),
		// stripe-go logs Stripe's raw error bodies; we log what we decide.
		LeveledLogger:   &stripego.LeveledLogger{Level: stripego.LevelNull},
		EnableTelemetry: stripego.Bool(false),
	})
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{
		client: stripego.NewClient(cfg.SecretKey, stripego.WithBackends(backends)),
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
func createParams(req payment.ProviderChargeRequest, amount int64) *stripego.PaymentIntentCreateParams {
	metadata := maps.Clone(req.Metadata)
	if metadata == nil {
		metadata = map[string]string{}
	}
	metadata[MetadataAttemptID] = req.AttemptID.String()
	params := &stripego.PaymentIntentCreateParams{
		Amount:        stripego.Int64(amount),
		Currency:      stripego.String(currencyParam(req.Currency)),
		PaymentMethod: stripego.String(req.PaymentMethod),
		// Cards only: chargeonce's payment method is a card token, and no
		// other payment method's redirects or vouchers are handled.
		PaymentMethodTypes: stripego.StringSlice([]string{"card"}),
		Confirm:            stripego.Bool(true),
		Metadata:           metadata,
	}
	if req.Description != "" {
		params.Description = stripego.String(req.Description)
	}
	if req.ReturnURL != "" {
		// 3-D Secure as a redirect: with return_url and without
		// use_stripe_sdk, a card that needs it waits in requires_action
		// with next_action.redirect_to_url, the bank's page, which sends
		// the shopper back here. It is a function of the attempt, so the
		// same on every send.
		params.ReturnURL = stripego.String(req.ReturnURL)
	}
	if req.CaptureMethod == payment.CaptureManual {
		// Only authorize, capturable in parts where Stripe allows it (split
		// shipments), and answer with the charge, which says until when
		// and whether in parts. An automatic charge's request stays as it
		// was, so that a send of a key from before is still its repeat.
		params.CaptureMethod = stripego.String(string(stripego.PaymentIntentCaptureMethodManual))
		params.PaymentMethodOptions = &stripego.PaymentIntentCreatePaymentMethodOptionsParams{
			Card: &stripego.PaymentIntentCreatePaymentMethodOptionsCardParams{
				RequestMulticapture: stripego.String(string(stripego.PaymentIntentPaymentMethodOptionsCardRequestMulticaptureIfAvailable)),
			},
		}
		params.AddExpand("latest_charge")
	}
	params.SetIdempotencyKey(req.IdempotencyKey)
	return params
}

// FindCharges implements payment.Provider: it finds the attempt's
// PaymentIntents by the attempt id in their metadata, whatever key each was
// created under, and reads each by id: how a wait for the shopper ended is
// found so. A PaymentIntent that was created but never confirmed holds no
// charge and is left out; settle's re-send under the same key confirms it
// (see settle). Stripe's Search API is not used: it lags behind writes by
// up to a minute, so "not found" would prove nothing.
func (p *Provider) FindCharges(ctx context.Context, req payment.ProviderChargeRequest) ([]payment.ProviderCharge, error) {
	intents, err := p.lookup(ctx, req)
	if err != nil {
		return nil, err
	}
	var found []payment.ProviderCharge
	for _, pi := range intents {
		pc, err := p.outcome(ctx, req, pi)
		if errors.Is(err, errUnconfirmed) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = append(found, pc)
	}
	return found, nil
}

// retrieve reads a PaymentIntent by id, as it is now, with its latest
// charge, which says whether and until when it holds an authorization.
func (p *Provider) retrieve(ctx context.Context, id string) (*stripego.PaymentIntent, error) {
	params := &stripego.PaymentIntentRetrieveParams{}
	params.AddExpand("latest_charge")
	pi, err := p.client.V1PaymentIntents.Retrieve(ctx, id, params)
	if err != nil {
		return nil, p.callFailed(ctx, "retrieve PaymentIntent "+id, err)
	}
	return pi, nil
}

// replayed reports whether an answer is Stripe's saved answer to an earlier
// send under the same idempotency key.
func replayed(r *stripego.APIResponse) bool {
	return r != nil && r.Header.Get("Idempotent-Replayed") == "true"
}

func piID(pi *stripego.PaymentIntent) string {
	if pi == nil {
		return ""
	}
	return pi.ID
}
