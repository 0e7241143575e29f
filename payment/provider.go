package payment

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"chargeonce/metrics"
)

// ErrOutcomeUnknown means the provider may or may not have charged: the
// request timed out, the connection dropped, or the provider answered 5xx.
// Such an attempt stays PROCESSING; it is never marked FAILED on a guess.
var ErrOutcomeUnknown = errors.New("provider outcome unknown")

// ErrProviderKeySpent means that no send under the request's provider key
// can ever charge: the provider saved a failure for the key and replays it
// on every send (Stripe does so with a 500), and it certainly holds no charge
// for the attempt under any key. Only then may the attempt be sent again
// under a new provider key, which settle records on the attempt first.
var ErrProviderKeySpent = errors.New("provider key spent: the provider replays a failure for it and holds no charge for the attempt")

// ProviderChargeRequest asks the provider to charge a card once per
// IdempotencyKey (our provider key, not the client's key).
type ProviderChargeRequest struct {
	IdempotencyKey string
	// AttemptID and AttemptCreatedAt name the attempt whatever its provider
	// key, for a provider that finds charges by the attempt (the id is also
	// in Metadata as chargeonce_attempt_id); no charge for the attempt is
	// older than AttemptCreatedAt.
	AttemptID        uuid.UUID
	AttemptCreatedAt time.Time
	Amount           int64
	Currency         string
	PaymentMethod    string
	Description      string
	Metadata         map[string]string
}

// ProviderCharge is the provider's definitive answer.
type ProviderCharge struct {
	ID             string
	Succeeded      bool
	FailureCode    string // set when !Succeeded
	FailureMessage string
}

// Provider is a card provider that deduplicates on the idempotency key.
type Provider interface {
	// CreateCharge charges the card, or returns the charge already made under
	// the same idempotency key. A decline is a ProviderCharge with Succeeded
	// false, not an error; an error wrapping ErrOutcomeUnknown means nobody
	// knows yet.
	CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error)
	// FindCharge looks up the charge that req made, by its idempotency key
	// or by its attempt; nil when the provider has none. It is given the
	// whole request so that a provider may also send it again or search by
	// the attempt.
	FindCharge(ctx context.Context, req ProviderChargeRequest) (*ProviderCharge, error)
}

// HTTPProvider talks to a provider with the simulator's HTTP API
// (POST /v1/charges with an Idempotency-Key header).
type HTTPProvider struct {
	baseURL string
	client  *http.Client
}

// NewHTTPProvider returns a client for the provider at baseURL (e.g.
// http://127.0.0.1:8080/provider). timeout bounds each call; transport
// carries the requests (nil: the network, with connections kept for bursts
// of checkouts).
func NewHTTPProvider(baseURL string, timeout time.Duration, transport http.RoundTripper) *HTTPProvider {
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Every charge goes to the same host; keep enough idle connections for
		// bursts of checkouts instead of opening one per request.
		t.MaxIdleConnsPerHost = 64
		transport = t
	}
	return &HTTPProvider{
		baseURL: strings.TrimRight(baseURL, "/"),
		client:  &http.Client{Timeout: timeout, Transport: transport},
	}
}

type providerCharge struct {
	ID             string  `json:"id"`
	Status         string  `json:"status"`
	FailureCode    *string `json:"failure_code"`
	FailureMessage *string `json:"failure_message"`
}

type providerError struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Charge  string `json:"charge"`
	} `json:"error"`
}

func (c providerCharge) domain() ProviderCharge {
	pc := ProviderCharge{ID: c.ID, Succeeded: c.Status == "succeeded"}
	if !pc.Succeeded {
		pc.FailureCode = cmp.Or(deref(c.FailureCode), "card_declined")
		pc.FailureMessage = cmp.Or(deref(c.FailureMessage), "The card was declined.")
	}
	return pc
}

// CreateCharge implements Provider.
func (p *HTTPProvider) CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error) {
	fields := map[string]any{
		"amount":         req.Amount,
		"currency":       req.Currency,
		"payment_method": req.PaymentMethod,
		"metadata":       req.Metadata,
	}
	if req.Description != "" {
		fields["description"] = req.Description
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return ProviderCharge{}, err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.baseURL+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return ProviderCharge{}, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	resp, err := p.client.Do(httpReq)
	if err != nil {
		return ProviderCharge{}, fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ProviderCharge{}, fmt.Errorf("%w: read response: %v", ErrOutcomeUnknown, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		var c providerCharge
		if err := json.Unmarshal(raw, &c); err != nil || c.ID == "" {
			return ProviderCharge{}, fmt.Errorf("%w: unreadable charge (status 200)", ErrOutcomeUnknown)
		}
		return c.domain(), nil
	case resp.StatusCode == http.StatusPaymentRequired || resp.StatusCode == http.StatusBadRequest:
		// A decline (402) or a request the provider refuses as such (400, e.g.
		// an unknown card token): definitive, nothing was charged, and sending
		// it again would get the same answer.
		var e providerError
		if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" {
			return ProviderCharge{}, fmt.Errorf("%w: unreadable error (status %d)", ErrOutcomeUnknown, resp.StatusCode)
		}
		return ProviderCharge{ID: e.Error.Charge, FailureCode: e.Error.Code, FailureMessage: e.Error.Message}, nil
	default:
		// 5xx, 429, 409 and anything unexpected: the charge may exist. Only the
		// lookup by idempotency key can tell.
		return ProviderCharge{}, fmt.Errorf("%w: provider answered %d", ErrOutcomeUnknown, resp.StatusCode)
	}
}

// FindCharge implements Provider, by our provider key.
func (p *HTTPProvider) FindCharge(ctx context.Context, req ProviderChargeRequest) (*ProviderCharge, error) {
	u := p.baseURL + "/v1/charges?" + url.Values{"idempotency_key": {req.IdempotencyKey}}.Encode()
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(httpReq)
	if err != nil {
		return nil, fmt.Errorf("look up charge: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("look up charge: provider answered %d", resp.StatusCode)
	}
	var list struct {
		Data []providerCharge `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("look up charge: %w", err)
	}
	if len(list.Data) == 0 {
		return nil, nil
	}
	c := list.Data[0].domain()
	return &c, nil
}

// instrumented is a Provider that times and counts every call.
type instrumented struct {
	Provider
	m *metrics.Metrics
}

func instrument(p Provider, m *metrics.Metrics) Provider { return instrumented{Provider: p, m: m} }

func (p instrumented) CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error) {
	start := time.Now()
	pc, err := p.Provider.CreateCharge(ctx, req)
	result := "ok"
	switch {
	case err != nil && errors.Is(err, ErrOutcomeUnknown):
		result = "unknown"
	case err != nil && errors.Is(err, ErrProviderKeySpent):
		result = "key_spent"
	case err != nil:
		result = "error"
	case !pc.Succeeded:
		result = "declined"
	}
	p.observe("create_charge", result, start)
	return pc, err
}

func (p instrumented) FindCharge(ctx context.Context, req ProviderChargeRequest) (*ProviderCharge, error) {
	start := time.Now()
	pc, err := p.Provider.FindCharge(ctx, req)
	result := "ok"
	switch {
	case err != nil:
		result = "error"
	case pc == nil:
		result = "not_found"
	}
	p.observe("find_charge", result, start)
	return pc, err
}

func (p instrumented) observe(operation, result string, start time.Time) {
	p.m.ProviderDuration.WithLabelValues(operation, result).Observe(time.Since(start).Seconds())
	if result == "unknown" || result == "error" || result == "key_spent" {
		p.m.ProviderErrors.WithLabelValues(operation).Inc()
	}
}
