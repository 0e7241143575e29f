package stripefake

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The PaymentIntent endpoints: created (and confirmed), read, listed
// newest first, confirmed, captured and cancelled, as Stripe's test cards
// behave. run routes the refund endpoints too (refunds.go). A read, a
// create, a confirm and a capture render latest_charge expanded when asked
// to (expand[]=latest_charge), as Stripe does; every other answer, an event
// and a list render its id.

type intent struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CaptureMethod      string            `json:"capture_method"`
	Currency           string            `json:"currency"`
	Status             string            `json:"status"`
	Created            int64             `json:"created"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	PaymentMethod      string            `json:"payment_method"`
	Description        *string           `json:"description"`
	ClientSecret       string            `json:"client_secret"`
	LastPaymentError   *stripeError      `json:"last_payment_error"`
	CanceledAt         *int64            `json:"canceled_at"`
	CancellationReason *string           `json:"cancellation_reason"`
	NextAction         map[string]any    `json:"next_action"`
	LatestCharge       *string           `json:"latest_charge"`

	key       string // the idempotency key it was created under
	returnURL string // the return_url it was confirmed with, where its redirect sends the shopper back
	// multicapture: request_multicapture=if_available at its creation.
	multicapture bool
	charge       *charge   // its card's charge, once authorized or paid
	captures     []capture // its captures, oldest first
}

type stripeError struct {
	Type          string  `json:"type"`
	Code          string  `json:"code,omitempty"`
	DeclineCode   string  `json:"decline_code,omitempty"`
	Message       string  `json:"message"`
	Param         string  `json:"param,omitempty"`
	PaymentIntent *intent `json:"payment_intent,omitempty"`
}

// run routes a request; keep says whether Stripe would save its answer.
func (s *Server) run(r *http.Request, call Call, fault Fault) (status int, body []byte, keep bool) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/refunds"); ok {
		return s.runRefund(r, call, fault, rest)
	}
	path := strings.TrimPrefix(r.URL.Path, "/v1/payment_intents")
	if !strings.HasPrefix(r.URL.Path, "/v1/payment_intents") {
		return notFound("Unrecognized request URL")
	}
	id, action, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	expand := expandsLatestCharge(r.Form)
	if fault == CompletesFirst && id != "" {
		_ = s.CompleteAuthentication(id)
	}
	if fault == Error500 {
		return internalError()
	}
	switch {
	case r.Method == http.MethodPost && id == "":
		return s.create(r.PostForm, call.IdempotencyKey, fault, expand)
	case r.Method == http.MethodGet && id == "":
		return s.list(r.Form)
	case r.Method == http.MethodGet && action == "":
		s.mu.Lock()
		defer s.mu.Unlock()
		if pi := s.intents[id]; pi != nil {
			return http.StatusOK, render(pi, expand), true
		}
		return notFound("No such payment_intent: '" + id + "'")
	case r.Method == http.MethodPost && action == "confirm":
		return s.confirm(id, r.PostForm, expand)
	case r.Method == http.MethodPost && action == "capture":
		return s.capture(id, r.PostForm, call.IdempotencyKey, fault, expand)
	case r.Method == http.MethodPost && action == "cancel":
		return s.cancel(id, r.PostForm.Get("cancellation_reason"), fault)
	}
	return notFound("Unrecognized request URL")
}

func (s *Server) create(form url.Values, key string, fault Fault, expand bool) (int, []byte, bool) {
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	if err != nil || amount <= 0 {
		return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: "parameter_invalid_integer",
			Param: "amount", Message: "Invalid integer"}), false
	}
	pm := form.Get("payment_method")
	if !strings.HasPrefix(pm, "pm_") {
		return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: "resource_missing",
			Param: "payment_method", Message: "No such PaymentMethod: '" + pm + "'"}), false
	}
	captureMethod := cmp.Or(form.Get("capture_method"), "automatic")
	if captureMethod != "automatic" && captureMethod != "manual" {
		return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: "parameter_invalid_string",
			Param: "capture_method", Message: "Invalid capture_method"}), false
	}
	metadata := formMetadata(form)
	if e := checkMetadata(metadata); e != nil {
		return http.StatusBadRequest, errorBody(*e), false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	pi := &intent{
		ID: fmt.Sprintf("pi_fake%06d%s", s.seq, randomID()[:8]), Object: "payment_intent",
		Amount: amount, Currency: form.Get("currency"), Status: "requires_confirmation", CaptureMethod: captureMethod,
		Created: time.Now().Unix(), Metadata: metadata, PaymentMethod: pm, key: key,
		returnURL:    form.Get("return_url"),
		multicapture: form.Get("payment_method_options[card][request_multicapture]") == "if_available",
	}
	if d := form.Get("description"); d != "" {
		pi.Description = &d
	}
	pi.ClientSecret = pi.ID + "_secret_" + randomID()
	s.intents[pi.ID] = pi
	s.order = append(s.order, pi)
	if fault == Error500AfterCreate {
		return internalError()
	}
	if form.Get("confirm") != "true" {
		return http.StatusOK, render(pi, expand), true
	}
	return s.confirmLocked(pi, form.Get("use_stripe_sdk") == "true", expand)
}

// formMetadata is the metadata[…] of a POST's form.
func formMetadata(form url.Values) map[string]string {
	metadata := map[string]string{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") {
			metadata[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	return metadata
}

// internalError is a 500 from a request that began to run, which Stripe
// saves for its key.
func internalError() (int, []byte, bool) {
	return http.StatusInternalServerError, errorBody(stripeError{Type: "api_error", Message: "internal error"}), true
}

func (s *Server) confirm(id string, form url.Values, expand bool) (int, []byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.intents[id]
	if pi == nil {
		return notFound("No such payment_intent: '" + id + "'")
	}
	if pi.Status != "requires_confirmation" && pi.Status != "requires_payment_method" {
		return unexpectedState(pi, "confirm")
	}
	if returnURL := form.Get("return_url"); returnURL != "" {
		pi.returnURL = returnURL
	}
	return s.confirmLocked(pi, form.Get("use_stripe_sdk") == "true", expand)
}

// confirmLocked runs the card of pi, as Stripe's test cards behave. A card
// that requires 3-D Secure, confirmed with a return_url and without
// use_stripe_sdk, is sent to the fake's challenge page (redirect_to_url);
// otherwise it waits for Stripe.js (use_stripe_sdk), which no test has. A
// card that is charged is authorized (chargeLocked).
func (s *Server) confirmLocked(pi *intent, useStripeSDK, expand bool) (int, []byte, bool) {
	decline := func(code, declineCode string) (int, []byte, bool) {
		pi.Status = "requires_payment_method"
		pi.LastPaymentError = &stripeError{Type: "card_error", Code: code, DeclineCode: declineCode,
			Message: "Your card was declined."}
		e := *pi.LastPaymentError
		snapshot := *pi
		e.PaymentIntent = &snapshot
		return http.StatusPaymentRequired, errorBody(e), true
	}
	switch pi.PaymentMethod {
	case "pm_card_chargeDeclined":
		return decline("card_declined", "generic_decline")
	case "pm_card_chargeDeclinedInsufficientFunds":
		return decline("card_declined", "insufficient_funds")
	case "pm_card_chargeDeclinedExpiredCard":
		return decline("expired_card", "")
	case "pm_card_authenticationRequired", "pm_card_threeDSecure2Required":
		pi.Status = "requires_action"
		pi.NextAction = map[string]any{"type": "use_stripe_sdk"}
		if pi.returnURL != "" && !useStripeSDK {
			pi.NextAction = map[string]any{"type": "redirect_to_url", "redirect_to_url": map[string]any{
				"url": s.challengeURL(pi.ID), "return_url": pi.returnURL,
			}}
		}
	case "pm_card_processing": // the fake's own: completes when a test says (SetStatus)
		pi.Status = "processing"
	default:
		s.chargeLocked(pi)
	}
	return http.StatusOK, render(pi, expand), true
}

// cancelReasons are the reasons a cancel request may give.
var cancelReasons = []string{"abandoned", "duplicate", "fraudulent", "requested_by_customer"}

// cancel cancels PaymentIntent id. An authorization's uncaptured amount is
// released; one that has captures (with multicapture) keeps them, as the
// fake models it.
func (s *Server) cancel(id, reason string, fault Fault) (int, []byte, bool) {
	if reason != "" && !slices.Contains(cancelReasons, reason) {
		return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: "parameter_invalid_string",
			Param: "cancellation_reason", Message: "Invalid cancellation_reason"}), false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.intents[id]
	if pi == nil {
		return notFound("No such payment_intent: '" + id + "'")
	}
	switch pi.Status {
	case "requires_payment_method", "requires_confirmation", "requires_action", "requires_capture":
	default:
		return unexpectedState(pi, "cancel")
	}
	var why *string
	if reason != "" {
		why = &reason
	}
	cancelLocked(pi, why)
	if fault == Error500AfterCreate {
		return internalError()
	}
	return http.StatusOK, render(pi, false), true
}

// cancelLocked cancels pi for reason, releasing what it holds uncaptured.
func cancelLocked(pi *intent, reason *string) {
	now := time.Now().Unix()
	pi.Status, pi.NextAction, pi.CancellationReason, pi.CanceledAt = "canceled", nil, reason, &now
	releaseLocked(pi)
}

func (s *Server) list(form url.Values) (int, []byte, bool) {
	gte, _ := strconv.ParseInt(form.Get("created[gte]"), 10, 64)
	limit, err := strconv.Atoi(form.Get("limit"))
	if err != nil || limit < 1 || limit > 100 {
		limit = 10
	}
	after := form.Get("starting_after")
	s.mu.Lock()
	defer s.mu.Unlock()
	// Newest first, as Stripe lists.
	var data []*intent
	skipping := after != ""
	for i := len(s.order) - 1; i >= 0; i-- {
		pi := s.order[i]
		if skipping {
			skipping = pi.ID != after
			continue
		}
		if pi.Created >= gte {
			data = append(data, pi)
		}
	}
	more := len(data) > limit
	if more {
		data = data[:limit]
	}
	return http.StatusOK, mustJSON(map[string]any{"object": "list", "url": "/v1/payment_intents",
		"has_more": more, "data": data}), true
}

func unexpectedState(pi *intent, action string) (int, []byte, bool) {
	snapshot := *pi
	return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: "payment_intent_unexpected_state",
		Message:       fmt.Sprintf("You cannot %s this PaymentIntent because it has a status of %s.", action, pi.Status),
		PaymentIntent: &snapshot}), true
}

func notFound(msg string) (int, []byte, bool) {
	return http.StatusNotFound, errorBody(stripeError{Type: "invalid_request_error", Code: "resource_missing", Message: msg}), false
}
