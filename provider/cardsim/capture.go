package cardsim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"chargeonce/payment"
)

// Authorizations, captures and voids: a charge made with capture_method
// manual, POST /v1/captures and POST /v1/voids under our provider key, and
// GET /v1/captures and /v1/voids to find them again. The simulator's codes
// for a refused capture or void are payment's Failure* strings
// (authorization_expired, capture_exceeds_authorization,
// charge_not_capturable, charge_voided, charge_captured), so a refusal
// keeps its code; a declined capture keeps the card's.

// authorization maps the authorization of c, a manual charge that
// succeeded, to chargeonce's terms.
func (c charge) authorization() (payment.ProviderAuthorization, error) {
	state := payment.AuthorizationState(*c.AuthorizationStatus)
	switch state {
	case payment.AuthorizationOpen, payment.AuthorizationCaptured, payment.AuthorizationVoided, payment.AuthorizationExpired:
	default:
		return payment.ProviderAuthorization{}, fmt.Errorf("charge %s has the unknown authorization status %q", c.ID, state)
	}
	pa := payment.ProviderAuthorization{State: state, Amount: c.Amount, Captured: c.AmountCaptured}
	if c.AuthorizationExpiresAt != nil {
		pa.ExpiresAt = time.Unix(*c.AuthorizationExpiresAt, 0).UTC()
	}
	return pa, nil
}

// capture is a capture on the wire. A null failure code or message decodes
// as "".
type capture struct {
	ID             string `json:"id"`
	Status         string `json:"status"` // succeeded, or failed: declined
	FailureCode    string `json:"failure_code"`
	FailureMessage string `json:"failure_message"`
}

func (c capture) domain() payment.ProviderCapture {
	if c.Status == "succeeded" {
		return payment.ProviderCapture{ID: c.ID, Succeeded: true}
	}
	return payment.ProviderCapture{
		ID:             c.ID,
		FailureCode:    cmp.Or(c.FailureCode, "card_declined"),
		FailureMessage: cmp.Or(c.FailureMessage, "The capture was declined."),
	}
}

// void is a void on the wire: one that is stored was made.
type void struct {
	ID string `json:"id"`
}

// CaptureCharge implements payment.Provider: POST /v1/captures under our
// provider key. A capture the card declines (402) or the authorization
// refuses (400) is a ProviderCapture that did not succeed, with the
// simulator's code; any other answer, or none, leaves it open.
func (p *Provider) CaptureCharge(ctx context.Context, req payment.ProviderCaptureRequest) (payment.ProviderCapture, error) {
	status, raw, err := p.post(ctx, "/v1/captures", req.IdempotencyKey, map[string]any{
		"charge": req.ProviderChargeID, "amount": req.Amount, "currency": req.Currency,
		"final": req.Final, "metadata": req.Metadata,
	})
	if err != nil {
		return payment.ProviderCapture{}, fmt.Errorf("capture %s: %w: %v", req.ProviderChargeID, payment.ErrOutcomeUnknown, err)
	}
	switch status {
	case http.StatusOK:
		var c capture
		if err := json.Unmarshal(raw, &c); err != nil || c.ID == "" {
			return payment.ProviderCapture{}, fmt.Errorf("capture %s: %w: unreadable capture (status 200)", req.ProviderChargeID, payment.ErrOutcomeUnknown)
		}
		return c.domain(), nil
	case http.StatusPaymentRequired, http.StatusBadRequest:
		// Declined (402, stored under the key) or refused (400, nothing
		// stored): either way nothing was captured, and sending it again
		// would get the same answer.
		e, err := refusalOf(raw, status)
		if err != nil {
			return payment.ProviderCapture{}, fmt.Errorf("capture %s: %w", req.ProviderChargeID, err)
		}
		return payment.ProviderCapture{ID: e.Error.Capture, FailureCode: e.Error.Code, FailureMessage: e.Error.Message}, nil
	default:
		// 5xx, 409 and anything unexpected: the capture may exist.
		return payment.ProviderCapture{}, fmt.Errorf("capture %s: %w: provider answered %d", req.ProviderChargeID, payment.ErrOutcomeUnknown, status)
	}
}

// FindCapture implements payment.Provider: the capture of our provider key,
// or else the oldest whose metadata names the attempt (made under an
// earlier key); nil when there is none. It never sends a capture.
func (p *Provider) FindCapture(ctx context.Context, req payment.ProviderCaptureRequest) (*payment.ProviderCapture, error) {
	found, err := find[capture](ctx, p, "captures", req.IdempotencyKey, req.AttemptID, req.ProviderChargeID)
	if err != nil || found == nil {
		return nil, err
	}
	pc := found.domain()
	return &pc, nil
}

// VoidCharge implements payment.Provider: POST /v1/voids under our provider
// key. A void the authorization refuses (400: captured, expired) is a
// ProviderVoid that did not succeed, with the simulator's code; any other
// answer, or none, leaves it open.
func (p *Provider) VoidCharge(ctx context.Context, req payment.ProviderVoidRequest) (payment.ProviderVoid, error) {
	status, raw, err := p.post(ctx, "/v1/voids", req.IdempotencyKey, map[string]any{
		"charge": req.ProviderChargeID, "metadata": req.Metadata,
	})
	if err != nil {
		return payment.ProviderVoid{}, fmt.Errorf("void %s: %w: %v", req.ProviderChargeID, payment.ErrOutcomeUnknown, err)
	}
	switch status {
	case http.StatusOK:
		var v void
		if err := json.Unmarshal(raw, &v); err != nil || v.ID == "" {
			return payment.ProviderVoid{}, fmt.Errorf("void %s: %w: unreadable void (status 200)", req.ProviderChargeID, payment.ErrOutcomeUnknown)
		}
		return payment.ProviderVoid{ID: v.ID, Succeeded: true}, nil
	case http.StatusBadRequest:
		e, err := refusalOf(raw, status)
		if err != nil {
			return payment.ProviderVoid{}, fmt.Errorf("void %s: %w", req.ProviderChargeID, err)
		}
		return payment.ProviderVoid{FailureCode: e.Error.Code, FailureMessage: e.Error.Message}, nil
	default:
		return payment.ProviderVoid{}, fmt.Errorf("void %s: %w: provider answered %d", req.ProviderChargeID, payment.ErrOutcomeUnknown, status)
	}
}

// FindVoid implements payment.Provider, as FindCapture.
func (p *Provider) FindVoid(ctx context.Context, req payment.ProviderVoidRequest) (*payment.ProviderVoid, error) {
	found, err := find[void](ctx, p, "voids", req.IdempotencyKey, req.AttemptID, req.ProviderChargeID)
	if err != nil || found == nil {
		return nil, err
	}
	return &payment.ProviderVoid{ID: found.ID, Succeeded: true}, nil
}

// ReadAuthorization implements payment.Provider: GET /v1/charges/{id}, an
// authorization as it is now (an open one past its time reads expired).
func (p *Provider) ReadAuthorization(ctx context.Context, providerChargeID string) (payment.ProviderAuthorization, error) {
	c, err := p.getCharge(ctx, providerChargeID)
	if err != nil {
		return payment.ProviderAuthorization{}, fmt.Errorf("read authorization %s: %w", providerChargeID, err)
	}
	if c.Status != "succeeded" || c.AuthorizationStatus == nil {
		return payment.ProviderAuthorization{}, fmt.Errorf("read authorization %s: the charge is no authorization (status %s)", providerChargeID, c.Status)
	}
	return c.authorization()
}

// find reads the capture or void (what: "captures", "voids") that an
// attempt made: the one of key, or else the oldest of charge's whose
// metadata names the attempt; nil when there is none.
func find[T any](ctx context.Context, p *Provider, what, key string, attempt uuid.UUID, charge string) (*T, error) {
	found, err := list[T](ctx, p, what, url.Values{"idempotency_key": {key}})
	if err != nil {
		return nil, err
	}
	if len(found) == 0 && attempt != uuid.Nil && charge != "" {
		// One attempt makes one capture (or void) however many keys it
		// was sent under; a page holds them all.
		query := url.Values{"charge": {charge}, "attempt_id": {attempt.String()}, "limit": {strconv.Itoa(maxListLimit)}}
		if found, err = list[T](ctx, p, what, query); err != nil {
			return nil, err
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	return &found[len(found)-1], nil // the list is newest first
}

// refusalOf reads the error answer raw of a refused (status) capture or
// void; one that cannot be read leaves the outcome open.
func refusalOf(raw []byte, status int) (apiError, error) {
	var e apiError
	if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" {
		return apiError{}, fmt.Errorf("%w: unreadable error (status %d)", payment.ErrOutcomeUnknown, status)
	}
	return e, nil
}
