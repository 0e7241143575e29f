// Package cardsim is chargeonce's client of the card simulator's HTTP API
// (POST /v1/charges with an Idempotency-Key header, GET /v1/charges to find
// the charges of an attempt, or of that key, POST /v1/charges/{id}/cancel to give up on a charge
// that waits for 3-D Secure, POST and GET /v1/refunds to refund a charge and
// find the refund, POST and GET /v1/captures and /v1/voids to capture or
// void an authorization and find the capture or void): a payment.Provider
// for development and tests. The
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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

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
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
	FailureCode    string `json:"failure_code"`
	FailureMessage string `json:"failure_message"`
	// AuthorizationStatus is set on an authorization (a manual charge that
	// succeeded), with AuthorizationExpiresAt (Unix seconds) and
	// AmountCaptured.
	AuthorizationStatus    *string `json:"authorization_status"`
	AuthorizationExpiresAt *int64  `json:"authorization_expires_at"`
	AmountCaptured         int64   `json:"amount_captured"`
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
		Capture string `json:"capture"` // the declined capture of a card_error
	} `json:"error"`
}

// domain maps c to chargeonce's terms: a charge that requires_action
// waits for the shopper at its challenge page; canceled (chargeonce gave up
// on the shopper) and failed are failures.
func (c charge) domain() (payment.ProviderCharge, error) {
	switch c.Status {
	case "succeeded":
		pc := payment.ProviderCharge{ID: c.ID, Succeeded: true}
		if c.AuthorizationStatus != nil {
			pa, err := c.authorization()
			if err != nil {
				return payment.ProviderCharge{}, err
			}
			pc.Authorization = &pa
		}
		return pc, nil
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
	if req.CaptureMethod == payment.CaptureManual {
		fields["capture_method"] = string(payment.CaptureManual)
	}
	status, raw, err := p.post(ctx, "/v1/charges", req.IdempotencyKey, fields)
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

// FindCharges implements payment.Provider: it lists the charges that name
// the attempt in their metadata, whatever key they were sent under (by our
// provider key for a request that names no attempt), oldest first.
func (p *Provider) FindCharges(ctx context.Context, req payment.ProviderChargeRequest) ([]payment.ProviderCharge, error) {
	query := url.Values{"idempotency_key": {req.IdempotencyKey}}
	if req.AttemptID != uuid.Nil {
		query = url.Values{"attempt_id": {req.AttemptID.String()}}
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodGet, p.baseURL+"/v1/charges?"+query.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(httpReq)
	if err != nil {
		return nil, fmt.Errorf("look up charges: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("look up charges: provider answered %d", resp.StatusCode)
	}
	var list struct {
		Data []charge `json:"data"` // newest first
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("look up charges: %w", err)
	}
	var found []payment.ProviderCharge
	for _, c := range slices.Backward(list.Data) {
		pc, err := c.domain()
		if err != nil {
			return nil, fmt.Errorf("look up charges: %w", err)
		}
		found = append(found, pc)
	}
	return found, nil
}

// CancelCharge implements payment.Provider: it cancels charge id as
// abandoned. The simulator cancels only a charge that still waits; one
// that the shopper completed or failed meanwhile is refused
// (charge_unexpected_state), and is then read as it ended. Every other
// answer leaves the charge's fate open: an error.
func (p *Provider) CancelCharge(ctx context.Context, _ payment.ProviderChargeRequest, id string) (payment.ProviderCharge, error) {
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

// post sends fields, as JSON, to path under the idempotency key, and reads
// the answer as send does.
func (p *Provider) post(ctx context.Context, path, key string, fields map[string]any) (status int, body []byte, err error) {
	raw, err := json.Marshal(fields)
	if err != nil {
		return 0, nil, err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.baseURL+path, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Idempotency-Key", key)
	return p.send(httpReq)
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

// refund is a refund on the wire. A null failure code or message decodes
// as "".
type refund struct {
	ID             string            `json:"id"`
	Status         string            `json:"status"`
	FailureCode    string            `json:"failure_code"`
	FailureMessage string            `json:"failure_message"`
	Metadata       map[string]string `json:"metadata"`
}

// domain maps r to chargeonce's terms.
func (r refund) domain() (payment.ProviderRefund, error) {
	switch r.Status {
	case "pending":
		return payment.ProviderRefund{ID: r.ID, State: payment.RefundPending}, nil
	case "succeeded":
		return payment.ProviderRefund{ID: r.ID, State: payment.RefundSucceeded}, nil
	case "failed":
		return payment.ProviderRefund{
			ID:             r.ID,
			State:          payment.RefundFailed,
			FailureCode:    cmp.Or(r.FailureCode, "refund_failed"),
			FailureMessage: cmp.Or(r.FailureMessage, "The refund failed."),
		}, nil
	default:
		return payment.ProviderRefund{}, fmt.Errorf("refund %s has the unknown status %q", r.ID, r.Status)
	}
}

// CreateRefund implements payment.Provider: POST /v1/refunds under our
// provider key. A refund the simulator refuses (400: the charge did not
// succeed, or the amount is more than remains of it) is RefundFailed, with
// the simulator's code; any answer but a refund or a refusal leaves the
// refund's fate open.
func (p *Provider) CreateRefund(ctx context.Context, req payment.ProviderRefundRequest) (payment.ProviderRefund, error) {
	fields := map[string]any{"charge": req.ProviderChargeID, "metadata": req.Metadata}
	if req.Amount > 0 {
		fields["amount"] = req.Amount
	}
	if req.Reason != "" {
		fields["reason"] = req.Reason
	}
	status, raw, err := p.post(ctx, "/v1/refunds", req.IdempotencyKey, fields)
	if err != nil {
		return payment.ProviderRefund{}, fmt.Errorf("%w: %v", payment.ErrOutcomeUnknown, err)
	}
	switch status {
	case http.StatusOK:
		var r refund
		if err := json.Unmarshal(raw, &r); err != nil || r.ID == "" {
			return payment.ProviderRefund{}, fmt.Errorf("%w: unreadable refund (status 200)", payment.ErrOutcomeUnknown)
		}
		pr, err := r.domain()
		if err != nil {
			return payment.ProviderRefund{}, fmt.Errorf("%w: %v", payment.ErrOutcomeUnknown, err)
		}
		return pr, nil
	case http.StatusBadRequest:
		// Refused: nothing was refunded, and sending it again would get the
		// same answer.
		var e apiError
		if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" {
			return payment.ProviderRefund{}, fmt.Errorf("%w: unreadable error (status 400)", payment.ErrOutcomeUnknown)
		}
		return payment.ProviderRefund{State: payment.RefundFailed, FailureCode: e.Error.Code, FailureMessage: e.Error.Message}, nil
	default:
		// 5xx, 429, 409 and anything unexpected: the refund may exist.
		return payment.ProviderRefund{}, fmt.Errorf("%w: provider answered %d", payment.ErrOutcomeUnknown, status)
	}
}

// FindRefund implements payment.Provider: the refund of our provider key,
// or else the one among the charge's refunds whose metadata names the
// attempt (made under an earlier key); nil when there is none.
func (p *Provider) FindRefund(ctx context.Context, req payment.ProviderRefundRequest) (*payment.ProviderRefund, error) {
	found, err := list[refund](ctx, p, "refunds", url.Values{"idempotency_key": {req.IdempotencyKey}})
	if err != nil {
		return nil, err
	}
	if len(found) == 0 && req.ProviderChargeID != "" {
		all, err := list[refund](ctx, p, "refunds", url.Values{"charge": {req.ProviderChargeID}, "limit": {strconv.Itoa(maxListLimit)}})
		if err != nil {
			return nil, err
		}
		attempt := req.AttemptID.String()
		for _, r := range all {
			if r.Metadata["chargeonce_attempt_id"] == attempt {
				found = append(found, r)
				break
			}
		}
		if len(found) == 0 && len(all) == maxListLimit {
			// The attempt's refund may be beyond the page: "none" would be a guess.
			return nil, fmt.Errorf("look up refund: charge %s has more refunds than one list holds", req.ProviderChargeID)
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	pr, err := found[0].domain()
	if err != nil {
		return nil, fmt.Errorf("look up refund: %w", err)
	}
	return &pr, nil
}

// maxListLimit is the most a list of the simulator holds.
const maxListLimit = 1000

// list reads one page of GET /v1/what (refunds, captures, voids) with
// query, newest first.
func list[T any](ctx context.Context, p *Provider, what string, query url.Values) ([]T, error) {
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodGet, p.baseURL+"/v1/"+what+"?"+query.Encode(), nil)
	if err != nil {
		return nil, err
	}
	status, raw, err := p.send(httpReq)
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", what, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("look up %s: provider answered %d", what, status)
	}
	var page struct {
		Data []T `json:"data"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, fmt.Errorf("look up %s: %w", what, err)
	}
	return page.Data, nil
}
