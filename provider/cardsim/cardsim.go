// Package cardsim is chargeonce's client of the card simulator's HTTP API
// (POST /v1/charges with an Idempotency-Key header, GET /v1/charges to find
// a charge by that key): a payment.Provider for development and tests. The
// simulator itself is a separate service with its own schema, in the
// top-level package cardsim; code that needs both imports this one under
// another name (simprovider).
package cardsim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"chargeonce/payment"
)

// Provider talks to a provider with the simulator's HTTP API.
type Provider struct {
	baseURL string
	client  *http.Client
}

var _ payment.Provider = (*Provider)(nil)

// New returns a client for the provider at baseURL (e.g.
// http://127.0.0.1:8080/provider). timeout bounds each call; transport
// carries the requests (nil: the network, with connections kept for bursts
// of checkouts).
func New(baseURL string, timeout time.Duration, transport http.RoundTripper) *Provider {
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Every charge goes to the same host; keep enough idle connections for
		// bursts of checkouts instead of opening one per request.
		t.MaxIdleConnsPerHost = 64
		transport = t
	}
	return &Provider{
		baseURL: strings.TrimRight(baseURL, "/"),
		client:  &http.Client{Timeout: timeout, Transport: transport},
	}
}

// charge is a charge on the wire. A null failure code or message decodes
// as "".
type charge struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	FailureCode    string `json:"failure_code"`
	FailureMessage string `json:"failure_message"`
}

type apiError struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Charge  string `json:"charge"`
	} `json:"error"`
}

func (c charge) domain() payment.ProviderCharge {
	pc := payment.ProviderCharge{ID: c.ID, Succeeded: c.Status == "succeeded"}
	if !pc.Succeeded {
		pc.FailureCode = cmp.Or(c.FailureCode, "card_declined")
		pc.FailureMessage = cmp.Or(c.FailureMessage, "The card was declined.")
	}
	return pc
}

// CreateCharge implements payment.Provider.
func (p *Provider) CreateCharge(ctx context.Context, req payment.ProviderChargeRequest) (payment.ProviderCharge, error) {
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
		return payment.ProviderCharge{}, err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.baseURL+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return payment.ProviderCharge{}, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	resp, err := p.client.Do(httpReq)
	if err != nil {
		return payment.ProviderCharge{}, fmt.Errorf("%w: %v", payment.ErrOutcomeUnknown, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return payment.ProviderCharge{}, fmt.Errorf("%w: read response: %v", payment.ErrOutcomeUnknown, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		var c charge
		if err := json.Unmarshal(raw, &c); err != nil || c.ID == "" {
			return payment.ProviderCharge{}, fmt.Errorf("%w: unreadable charge (status 200)", payment.ErrOutcomeUnknown)
		}
		return c.domain(), nil
	case resp.StatusCode == http.StatusPaymentRequired || resp.StatusCode == http.StatusBadRequest:
		// A decline (402) or a request the provider refuses as such (400, e.g.
		// an unknown card token): definitive, nothing was charged, and sending
		// it again would get the same answer.
		var e apiError
		if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" {
			return payment.ProviderCharge{}, fmt.Errorf("%w: unreadable error (status %d)", payment.ErrOutcomeUnknown, resp.StatusCode)
		}
		return payment.ProviderCharge{ID: e.Error.Charge, FailureCode: e.Error.Code, FailureMessage: e.Error.Message}, nil
	default:
		// 5xx, 429, 409 and anything unexpected: the charge may exist. Only the
		// lookup by idempotency key can tell.
		return payment.ProviderCharge{}, fmt.Errorf("%w: provider answered %d", payment.ErrOutcomeUnknown, resp.StatusCode)
	}
}

// FindCharge implements payment.Provider, by our provider key.
func (p *Provider) FindCharge(ctx context.Context, req payment.ProviderChargeRequest) (*payment.ProviderCharge, error) {
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
		Data []charge `json:"data"`
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
