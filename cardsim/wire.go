package cardsim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// chargeObject is the wire form of a charge, in every response.
type chargeObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	PaymentMethod  string            `json:"payment_method"`
	Description    *string           `json:"description"`
	FailureCode    *string           `json:"failure_code"`
	FailureMessage *string           `json:"failure_message"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
	// ReturnURL is the request's, or null; CancellationReason the cancel's.
	ReturnURL          *string `json:"return_url"`
	CancellationReason *string `json:"cancellation_reason"`
	// NextAction is what the shopper must do while the charge is
	// requires_action, and null in every other status.
	NextAction *nextAction `json:"next_action"`
	// AmountRefunded is the sum of the charge's succeeded refunds.
	AmountRefunded int64 `json:"amount_refunded"`
	// CaptureMethod is automatic or manual. Of a charge that succeeded,
	// AmountAuthorized is its amount, AmountCaptured what was taken (all of
	// it at once when automatic; its captures' sum when manual),
	// AmountCapturable what an open authorization still holds, and
	// AmountVoided what a void released; all 0 for any other charge.
	CaptureMethod    string `json:"capture_method"`
	AmountAuthorized int64  `json:"amount_authorized"`
	AmountCaptured   int64  `json:"amount_captured"`
	AmountCapturable int64  `json:"amount_capturable"`
	AmountVoided     int64  `json:"amount_voided"`
	// AuthorizationStatus is an authorization's (a manual charge that
	// succeeded): open, captured, voided or expired; null for any other
	// charge, as AuthorizationExpiresAt (Unix seconds), when an open one
	// lapses.
	AuthorizationStatus    *string `json:"authorization_status"`
	AuthorizationExpiresAt *int64  `json:"authorization_expires_at"`
}

// nextAction tells the caller where to send the shopper, as Stripe's
// PaymentIntent does for a redirect: to the challenge page (URL), which sends
// them back to ReturnURL.
type nextAction struct {
	Type          string        `json:"type"` // always "redirect_to_url"
	RedirectToURL redirectToURL `json:"redirect_to_url"`
}

type redirectToURL struct {
	URL       string `json:"url"`
	ReturnURL string `json:"return_url"`
}

// refundObject is the wire form of a refund, in every response.
type refundObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	Charge         string            `json:"charge"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"` // pending, succeeded or failed
	Reason         *string           `json:"reason"`
	FailureCode    *string           `json:"failure_code"`
	FailureMessage *string           `json:"failure_message"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
	// SettlesAt is when a pending refund becomes final, or when a final one
	// did (its creation, for one final at once).
	SettlesAt int64 `json:"settles_at"`
}

// captureObject is the wire form of a capture, in every response.
type captureObject struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	Charge   string `json:"charge"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Final: the capture released the rest of the authorization.
	Final          bool              `json:"final"`
	Status         string            `json:"status"` // succeeded or failed (declined)
	FailureCode    *string           `json:"failure_code"`
	FailureMessage *string           `json:"failure_message"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
}

// voidObject is the wire form of a void, in every response: a void that
// is stored was made.
type voidObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Charge         string            `json:"charge"`
	Status         string            `json:"status"` // always succeeded
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
}

type listObject[T any] struct {
	Object string `json:"object"`
	Data   []T    `json:"data"`
	// HasMore tells that the list goes on: the next page starts after the
	// last item of this one (starting_after).
	HasMore bool `json:"has_more"`
}

type apiError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Charge is the charge concerned: a card_error's, charge_unexpected_state's,
	// or that of a refund, capture or void refused.
	Charge string `json:"charge,omitempty"`
	// Capture is the declined capture of a card_error that a capture got.
	Capture string `json:"capture,omitempty"`
}

func invalidRequest(code, message string) apiError {
	return apiError{Type: "invalid_request_error", Code: code, Message: message}
}

var keyReusedError = apiError{
	Type: "idempotency_error", Code: "idempotency_key_reused",
	Message: "This idempotency key was already used with other request parameters.",
}

var internalError = apiError{Type: "api_error", Code: "internal_error", Message: "The card simulator failed to process the request."}

// toChargeObject is the wire form of c, whose challenge page, if it waits,
// is under publicBase (see handler.publicBase).
func toChargeObject(c charge, publicBase string) chargeObject {
	o := chargeObject{
		ID:                 c.ID,
		Object:             "charge",
		Amount:             c.Amount,
		Currency:           c.Currency,
		Status:             c.Status,
		PaymentMethod:      c.PaymentMethod,
		Description:        c.Description,
		FailureCode:        c.FailureCode,
		FailureMessage:     c.FailureMessage,
		IdempotencyKey:     c.IdempotencyKey,
		Metadata:           c.Metadata,
		Created:            c.Created.Unix(),
		ReturnURL:          c.ReturnURL,
		CancellationReason: c.CancellationReason,
		AmountRefunded:     c.AmountRefunded,
		CaptureMethod:      c.CaptureMethod,
	}
	o.AmountAuthorized, o.AmountCaptured, o.AmountCapturable, o.AmountVoided = c.amounts()
	if c.AuthorizationStatus != nil {
		o.AuthorizationStatus = c.AuthorizationStatus
		o.AuthorizationExpiresAt = new(c.AuthorizationExpiresAt.Unix())
	}
	if c.Status == statusRequiresAction {
		o.NextAction = &nextAction{Type: "redirect_to_url", RedirectToURL: redirectToURL{
			URL: challengeURL(publicBase, c.ID), ReturnURL: deref(c.ReturnURL),
		}}
	}
	return o
}

func toCaptureObject(p capture) captureObject {
	return captureObject{
		ID:             p.ID,
		Object:         "capture",
		Charge:         p.ChargeID,
		Amount:         p.Amount,
		Currency:       p.Currency,
		Final:          p.Final,
		Status:         p.Status,
		FailureCode:    p.FailureCode,
		FailureMessage: p.FailureMessage,
		IdempotencyKey: p.IdempotencyKey,
		Metadata:       p.Metadata,
		Created:        p.Created.Unix(),
	}
}

func toVoidObject(v void) voidObject {
	return voidObject{
		ID:             v.ID,
		Object:         "void",
		Charge:         v.ChargeID,
		Status:         statusSucceeded,
		IdempotencyKey: v.IdempotencyKey,
		Metadata:       v.Metadata,
		Created:        v.Created.Unix(),
	}
}

func toRefundObject(r refund) refundObject {
	return refundObject{
		ID:             r.ID,
		Object:         "refund",
		Amount:         r.Amount,
		Charge:         r.ChargeID,
		Currency:       r.Currency,
		Status:         r.Status,
		Reason:         r.Reason,
		FailureCode:    r.FailureCode,
		FailureMessage: r.FailureMessage,
		IdempotencyKey: r.IdempotencyKey,
		Metadata:       r.Metadata,
		Created:        r.Created.Unix(),
		SettlesAt:      r.SettlesAt.Unix(),
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own plain structs are encoded: this cannot happen.
		panic(fmt.Sprintf("cardsim: encode response: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, status int, e apiError) {
	writeJSON(w, status, struct {
		Error apiError `json:"error"`
	}{e})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
