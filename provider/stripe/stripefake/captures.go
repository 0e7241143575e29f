package stripefake

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Authorizations and their captures. A PaymentIntent created with
// capture_method=manual is authorized when its card is charged: it waits
// in requires_capture with amount_capturable, and its charge says until
// when (payment_method_details.card.capture_before, AuthorizationWindow
// after the authorization) and whether it may be captured in parts
// (multicapture.status: available when it was created with
// payment_method_options[card][request_multicapture]=if_available and the
// fake's multicapture is on, SetMulticapture). POST …/capture takes
// amount_to_capture (all that is capturable when left out) and, with
// multicapture only, final_capture=false to keep the rest for later
// captures; any other capture is final and releases the rest. The
// capture's metadata is merged into the PaymentIntent's (an empty value
// unsets a key). A capture of more than is capturable is refused with 400
// amount_too_large, one of a PaymentIntent that is not in
// requires_capture with 400 payment_intent_unexpected_state (both saved
// for the key). ExpireAuthorization makes an authorization lapse now:
// with nothing captured the PaymentIntent is canceled with
// cancellation_reason automatic, as at Stripe; with captures it is
// succeeded with what they took, as the fake models it.

// AuthorizationWindow is how long after its authorization the fake holds a
// manual charge's money (capture_before), as Stripe does an online card's.
const AuthorizationWindow = 7 * 24 * time.Hour

// Stripe's limits on metadata (https://docs.stripe.com/api/metadata).
const (
	metadataMaxKeys     = 50
	metadataMaxKeyLen   = 40
	metadataMaxValueLen = 500
)

// charge is a PaymentIntent's charge, as its expanded latest_charge
// renders it.
type charge struct {
	ID                   string         `json:"id"`
	Object               string         `json:"object"`
	Amount               int64          `json:"amount"`
	AmountCaptured       int64          `json:"amount_captured"`
	AmountRefunded       int64          `json:"amount_refunded"`
	Captured             bool           `json:"captured"`
	Currency             string         `json:"currency"`
	Created              int64          `json:"created"`
	PaymentIntent        string         `json:"payment_intent"`
	Status               string         `json:"status"`
	PaymentMethodDetails paymentDetails `json:"payment_method_details"`
}

type paymentDetails struct {
	Type string      `json:"type"`
	Card cardDetails `json:"card"`
}

type cardDetails struct {
	Brand         string        `json:"brand"`
	Last4         string        `json:"last4"`
	CaptureBefore *int64        `json:"capture_before,omitempty"`
	Multicapture  *multicapture `json:"multicapture,omitempty"`
}

type multicapture struct {
	Status string `json:"status"`
}

// capture is a capture of a PaymentIntent: Stripe keeps no object for it,
// the fake only counts it.
type capture struct {
	amount int64
	final  bool
	key    string
}

// Capture is a capture the fake made of a PaymentIntent.
type Capture struct {
	Amount         int64
	Final          bool
	IdempotencyKey string
}

// SetMulticapture makes multicapture available (the default) or not to
// the authorizations made from now on, as Stripe decides for each
// authorization by the account and the card.
func (s *Server) SetMulticapture(available bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noMulticapture = !available
}

// FailCaptures makes the next n capture requests fail with f, then lets
// the rest through.
func (s *Server) FailCaptures(f Fault, n int) { s.failPostsTo("/capture", f, n) }

// FailCancels makes the next n cancel requests fail with f, then lets the
// rest through.
func (s *Server) FailCancels(f Fault, n int) { s.failPostsTo("/cancel", f, n) }

func (s *Server) failPostsTo(suffix string, f Fault, n int) {
	left := n
	s.Script(func(c Call) Fault {
		if c.Method == http.MethodPost && strings.HasPrefix(c.Path, "/v1/payment_intents/") && strings.HasSuffix(c.Path, suffix) && left > 0 {
			left--
			return f
		}
		return None
	})
}

// ExpireAuthorization makes the authorization of PaymentIntent id, in
// requires_capture, lapse now, as Stripe does after its capture_before:
// what is uncaptured is released; with nothing captured the PaymentIntent
// is canceled with cancellation_reason automatic, with captures it is
// succeeded.
func (s *Server) ExpireAuthorization(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.intents[id]
	switch {
	case pi == nil:
		return fmt.Errorf("stripefake: no PaymentIntent %s", id)
	case pi.Status != "requires_capture":
		return fmt.Errorf("stripefake: PaymentIntent %s is %s, not an open authorization", id, pi.Status)
	}
	now := time.Now().Unix()
	pi.charge.PaymentMethodDetails.Card.CaptureBefore = &now
	if pi.AmountReceived > 0 {
		pi.Status = "succeeded"
		releaseLocked(pi)
		return nil
	}
	reason := "automatic"
	cancelLocked(pi, &reason)
	return nil
}

// Captures lists the captures of PaymentIntent id, oldest first.
func (s *Server) Captures(id string) []Capture {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.intents[id]
	if pi == nil {
		return nil
	}
	out := make([]Capture, len(pi.captures))
	for i, c := range pi.captures {
		out[i] = Capture{Amount: c.amount, Final: c.final, IdempotencyKey: c.key}
	}
	return out
}

// chargeLocked charges pi's card: a manual PaymentIntent is authorized
// (requires_capture, all of it capturable), any other succeeds.
func (s *Server) chargeLocked(pi *intent) {
	s.seq++
	now := time.Now()
	ch := &charge{
		ID: fmt.Sprintf("ch_fake%06d%s", s.seq, randomID()[:8]), Object: "charge", Amount: pi.Amount,
		Currency: pi.Currency, Created: now.Unix(), PaymentIntent: pi.ID, Status: "succeeded",
		PaymentMethodDetails: paymentDetails{Type: "card", Card: cardDetails{Brand: "visa", Last4: "4242"}},
	}
	pi.charge, pi.LatestCharge, pi.LastPaymentError = ch, &ch.ID, nil
	if pi.CaptureMethod != "manual" {
		pi.Status, pi.AmountReceived = "succeeded", pi.Amount
		ch.Captured, ch.AmountCaptured = true, pi.Amount
		return
	}
	pi.Status, pi.AmountCapturable = "requires_capture", pi.Amount
	before := now.Add(AuthorizationWindow).Unix()
	status := "unavailable"
	if pi.multicapture && !s.noMulticapture {
		status = "available"
	}
	ch.PaymentMethodDetails.Card.CaptureBefore = &before
	ch.PaymentMethodDetails.Card.Multicapture = &multicapture{Status: status}
}

// releaseLocked releases what pi holds uncaptured.
func releaseLocked(pi *intent) {
	if pi.charge != nil {
		pi.charge.AmountRefunded += pi.AmountCapturable
	}
	pi.AmountCapturable = 0
}

// multicaptureAvailable reports whether pi may be captured in parts.
func multicaptureAvailable(pi *intent) bool {
	mc := pi.charge.PaymentMethodDetails.Card.Multicapture
	return mc != nil && mc.Status == "available"
}

// capture captures amount_to_capture of PaymentIntent id under key.
func (s *Server) capture(id string, form url.Values, key string, fault Fault, expand bool) (int, []byte, bool) {
	invalid := func(code, param, msg string) (int, []byte, bool) {
		return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: code, Param: param, Message: msg}), false
	}
	var amount int64
	if a := form.Get("amount_to_capture"); a != "" {
		var err error
		if amount, err = strconv.ParseInt(a, 10, 64); err != nil || amount <= 0 {
			return invalid("parameter_invalid_integer", "amount_to_capture", "Invalid integer")
		}
	}
	final := true
	switch form.Get("final_capture") {
	case "", "true":
	case "false":
		final = false
	default:
		return invalid("parameter_invalid_boolean", "final_capture", "Invalid boolean")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.intents[id]
	if pi == nil {
		return notFound("No such payment_intent: '" + id + "'")
	}
	metadata := maps.Clone(pi.Metadata)
	for k, v := range formMetadata(form) {
		if v == "" {
			delete(metadata, k)
		} else {
			metadata[k] = v
		}
	}
	if e := checkMetadata(metadata); e != nil {
		return http.StatusBadRequest, errorBody(*e), false
	}
	if pi.Status != "requires_capture" {
		return unexpectedState(pi, "capture")
	}
	if form.Get("final_capture") != "" && !multicaptureAvailable(pi) {
		return invalid("parameter_unknown", "final_capture",
			"final_capture can only be used when multicapture is available for this PaymentIntent.")
	}
	if amount == 0 {
		amount = pi.AmountCapturable
	}
	if amount > pi.AmountCapturable {
		return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: "amount_too_large", Param: "amount_to_capture",
			Message: fmt.Sprintf("The amount to capture (%d) is greater than the amount capturable (%d).", amount, pi.AmountCapturable)}), true
	}
	pi.Metadata = metadata
	pi.captures = append(pi.captures, capture{amount: amount, final: final, key: key})
	pi.AmountReceived += amount
	pi.AmountCapturable -= amount
	pi.charge.AmountCaptured += amount
	pi.charge.Captured = true
	if final || pi.AmountCapturable == 0 {
		pi.Status = "succeeded"
		releaseLocked(pi)
	}
	if fault == Error500AfterCreate {
		return internalError()
	}
	return http.StatusOK, render(pi, expand), true
}

// checkMetadata refuses metadata past Stripe's limits, as Stripe does
// before it runs a request.
func checkMetadata(m map[string]string) *stripeError {
	if len(m) > metadataMaxKeys {
		return &stripeError{Type: "invalid_request_error", Code: "parameter_invalid_empty", Param: "metadata",
			Message: fmt.Sprintf("Metadata can have up to %d keys.", metadataMaxKeys)}
	}
	for k, v := range m {
		if len(k) > metadataMaxKeyLen {
			return &stripeError{Type: "invalid_request_error", Code: "parameter_invalid_string", Param: "metadata",
				Message: fmt.Sprintf("Metadata keys can be up to %d characters long.", metadataMaxKeyLen)}
		}
		if len(v) > metadataMaxValueLen {
			return &stripeError{Type: "invalid_request_error", Code: "parameter_invalid_string", Param: "metadata",
				Message: fmt.Sprintf("Metadata values can be up to %d characters long.", metadataMaxValueLen)}
		}
	}
	return nil
}

// expandsLatestCharge reports whether a request asks for latest_charge
// expanded (expand[]=latest_charge, expand[0]=latest_charge, …).
func expandsLatestCharge(form url.Values) bool {
	for k, vs := range form {
		if k == "expand" || strings.HasPrefix(k, "expand[") {
			if slices.Contains(vs, "latest_charge") {
				return true
			}
		}
	}
	return false
}

// render is pi as an answer renders it: latest_charge as its id, or
// expanded.
func render(pi *intent, expand bool) []byte {
	if !expand || pi.charge == nil {
		return mustJSON(pi)
	}
	// The outer field hides the embedded one of the same name.
	return mustJSON(struct {
		*intent
		LatestCharge *charge `json:"latest_charge"`
	}{pi, pi.charge})
}
