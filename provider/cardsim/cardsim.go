// Package cardsim is chargeonce's client of the card simulator's HTTP API
// (POST /v1/charges with an Idempotency-Key header, GET /v1/charges to find
// a charge by that key, POST /v1/charges/{id}/cancel to give up on a charge
// that waits for 3-D Secure): a payment.Provider for development and tests. The
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
	// NextAction is set while the charge is requires_action.
	NextAction *struct {
		RedirectToURL struct {
			URL string `json:"url"`
		} `json:"redirect_to_url"`
	} `json:"next_action"`
}

type apiError struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Charge  string `json:"charge"`
	} `json:"error"`
}

// domain maps c to chargeonce's terms: a charge that requires_action
// waits for the shopper at its challenge page; canceled (chargeonce gave up
// on the shopper) and failed are failures.
func (c charge) domain() (payment.ProviderCharge, error) {
	switch c.Status {
	case "succeeded":
		return payment.ProviderCharge{ID: c.ID, Succeeded: true}, nil
	case "requires_action":
		if c.NextAction == nil || c.NextAction.RedirectToURL.URL == "" {
			return payment.ProviderCharge{}, fmt.Errorf("charge %s requires action but names no page to send the shopper to", c.ID)
		}
		return payment.ProviderCharge{ID: c.ID, Action: &payment.ProviderAction{URL: c.NextAction.RedirectToURL.URL}}, nil
	case "canceled":
		return payment.ProviderCharge{
			ID:             c.ID,
			FailureCode:    cmp.Or(c.FailureCode, payment.FailureAuthenticationAbandoned),
			FailureMessage: cmp.Or(c.FailureMessage, "The payment was cancelled before the shopper authenticated."),
		}, nil
	default:
		return payment.ProviderCharge{
			ID:             c.ID,
			FailureCode:    cmp.Or(c.FailureCode, "card_declined"),
			FailureMessage: cmp.Or(c.FailureMessage, "The card was declined."),
		}, nil
	}
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
	if req.ReturnURL != "" {
		fields["return_url"] = req.ReturnURL
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
	status, raw, err := p.send(httpReq)
	if err != nil {
		return payment.ProviderCharge{}, fmt.Errorf("%w: %v", payment.ErrOutcomeUnknown, err)
	}
	switch {
	case status == http.StatusOK:
		var c charge
		if err := json.Unmarshal(raw, &c); err != nil || c.ID == "" {
			return payment.ProviderCharge{}, fmt.Errorf("%w: unreadable charge (status 200)", payment.ErrOutcomeUnknown)
		}
		pc, err := c.domain()
		if err != nil {
			return payment.ProviderCharge{}, fmt.Errorf("%w: %v", payment.ErrOutcomeUnknown, err)
		}
		return pc, nil
	case status == http.StatusPaymentRequired || status == http.StatusBadRequest:
		// A decline (402) or a request the provider refuses as such (400, e.g.
		// an unknown card token): definitive, nothing was charged, and sending
		// it again would get the same answer.
		var e apiError
		if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" {
			return payment.ProviderCharge{}, fmt.Errorf("%w: unreadable error (status %d)", payment.ErrOutcomeUnknown, status)
		}
		return payment.ProviderCharge{ID: e.Error.Charge, FailureCode: e.Error.Code, FailureMessage: e.Error.Message}, nil
	default:
		// 5xx, 429, 409 and anything unexpected: the charge may exist. Only the
		// lookup by idempotency key can tell.
		return payment.ProviderCharge{}, fmt.Errorf("%w: provider answered %d", payment.ErrOutcomeUnknown, status)
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
	c, err := list.Data[0].domain()
	if err != nil {
		return nil, fmt.Errorf("look up charge: %w", err)
	}
	return &c, nil
}

// CancelCharge implements payment.Provider: it finds the charge of our
// provider key and cancels it as abandoned. The simulator cancels only a
// charge that still waits; one that the shopper completed or failed
// meanwhile is refused (charge_unexpected_state), and is then read as it
// ended. Every other answer leaves the charge's fate open: an error.
func (p *Provider) CancelCharge(ctx context.Context, req payment.ProviderChargeRequest) (payment.ProviderCharge, error) {
	found, err := p.FindCharge(ctx, req)
	if err != nil {
		return payment.ProviderCharge{}, fmt.Errorf("cancel charge: %w", err)
	}
	if found == nil {
		return payment.ProviderCharge{}, fmt.Errorf("cancel charge: the provider holds no charge for key %q", req.IdempotencyKey)
	}
	id := found.ID
	form := url.Values{"cancellation_reason": {"abandoned"}}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.chargeURL(id)+"/cancel", strings.NewReader(form.Encode()))
	if err != nil {
		return payment.ProviderCharge{}, err
	}
	httpReq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	status, raw, err := p.send(httpReq)
	if err != nil {
		return payment.ProviderCharge{}, fmt.Errorf("cancel charge %s: %w: %v", id, payment.ErrOutcomeUnknown, err)
	}
	var c charge
	switch {
	case status == http.StatusOK:
		if err := json.Unmarshal(raw, &c); err != nil || c.ID == "" {
			return payment.ProviderCharge{}, fmt.Errorf("cancel charge %s: %w: unreadable charge (status 200)", id, payment.ErrOutcomeUnknown)
		}
	case status == http.StatusBadRequest && errorCode(raw) == "charge_unexpected_state":
		// The wait ended before the cancel: the charge says how.
		if c, err = p.getCharge(ctx, id); err != nil {
			return payment.ProviderCharge{}, fmt.Errorf("cancel charge %s: refused, then %w", id, err)
		}
	default:
		return payment.ProviderCharge{}, fmt.Errorf("cancel charge %s: %w: provider answered %d", id, payment.ErrOutcomeUnknown, status)
	}
	pc, err := c.domain()
	if err != nil {
		return payment.ProviderCharge{}, fmt.Errorf("cancel charge %s: %w", id, err)
	}
	if pc.Action != nil {
		return payment.ProviderCharge{}, fmt.Errorf("cancel charge %s: it still waits for the shopper", id)
	}
	return pc, nil
}

// getCharge reads the charge id as it is now.
func (p *Provider) getCharge(ctx context.Context, id string) (charge, error) {
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodGet, p.chargeURL(id), nil)
	if err != nil {
		return charge{}, err
	}
	status, raw, err := p.send(httpReq)
	if err != nil {
		return charge{}, fmt.Errorf("get charge: %w", err)
	}
	if status != http.StatusOK {
		return charge{}, fmt.Errorf("get charge: provider answered %d", status)
	}
	var c charge
	if err := json.Unmarshal(raw, &c); err != nil || c.ID == "" {
		return charge{}, fmt.Errorf("get charge: unreadable charge")
	}
	return c, nil
}

func (p *Provider) chargeURL(id string) string {
	return p.baseURL + "/v1/charges/" + url.PathEscape(id)
}

// send sends httpReq and reads its answer, at most 1 MiB of it.
func (p *Provider) send(httpReq *http.Request) (status int, body []byte, err error) {
	resp, err := p.client.Do(httpReq)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("read response: %w", err)
	}
	return resp.StatusCode, body, nil
}

// errorCode is the code of an error answer, or "" when raw is not one.
func errorCode(raw []byte) string {
	var e apiError
	_ = json.Unmarshal(raw, &e)
	return e.Error.Code
}

// CreateRefund implements payment.Provider.
func (p *Provider) CreateRefund(ctx context.Context, req payment.ProviderRefundRequest) (payment.ProviderRefund, error) {
	return payment.ProviderRefund{}, fmt.Errorf("cardsim: refunds are not implemented yet: %w", payment.ErrOutcomeUnknown)
}

// FindRefund implements payment.Provider.
func (p *Provider) FindRefund(ctx context.Context, req payment.ProviderRefundRequest) (*payment.ProviderRefund, error) {
	return nil, fmt.Errorf("cardsim: refunds are not implemented yet")
}
