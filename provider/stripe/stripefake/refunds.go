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

// The refund endpoints: a refund of a PaymentIntent that succeeded,
// created under Stripe's idempotency like a PaymentIntent, read, and
// listed newest first. A PaymentIntent is never refunded more than it
// received (amount_received: its amount, or what its captures took): a
// refund beyond what is left is refused with 400 amount_too_large, one of
// a PaymentIntent refunded in full with 400 charge_already_refunded (both
// saved for the key, as answers of a request that ran). A refund succeeds at once, except those of a PaymentIntent
// charged with pm_card_refundPending (the fake's own), which stay pending
// until a test settles them (SettleRefund); SettleRefund also makes a
// succeeded refund fail later, as a card's refund can at Stripe. A failed
// or cancelled refund gives its amount back to the PaymentIntent.

// RefundPendingCard is the fake's own payment method whose charge succeeds
// and whose refunds stay pending until SettleRefund.
const RefundPendingCard = "pm_card_refundPending"

// stripeReasons are the reasons Stripe's refunds take.
var stripeReasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

type refund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Status        string            `json:"status"`
	Created       int64             `json:"created"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent string            `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	FailureReason string            `json:"failure_reason,omitempty"`

	key string // the idempotency key it was created under
}

// Refund is a refund the fake holds.
type Refund struct {
	ID             string
	Status         string
	PaymentIntent  string
	Amount         int64
	Reason         string
	FailureReason  string
	Metadata       map[string]string
	IdempotencyKey string
}

// Refunds lists the refunds, oldest first.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, len(s.refundOrder))
	for i, re := range s.refundOrder {
		out[i] = Refund{ID: re.ID, Status: re.Status, PaymentIntent: re.PaymentIntent, Amount: re.Amount,
			FailureReason: re.FailureReason, Metadata: maps.Clone(re.Metadata), IdempotencyKey: re.key}
		if re.Reason != nil {
			out[i].Reason = *re.Reason
		}
	}
	return out
}

// RefundsFor lists the refunds whose metadata has key = value (e.g.
// chargeonce_attempt_id).
func (s *Server) RefundsFor(key, value string) []Refund {
	var out []Refund
	for _, re := range s.Refunds() {
		if re.Metadata[key] == value {
			out = append(out, re)
		}
	}
	return out
}

// RefundsUnderKey counts the refunds created under an idempotency key.
func (s *Server) RefundsUnderKey(idempotencyKey string) int {
	n := 0
	for _, re := range s.Refunds() {
		if re.IdempotencyKey == idempotencyKey {
			n++
		}
	}
	return n
}

// SettleRefund moves refund id to status (succeeded, failed or canceled),
// with failureReason (expired_or_canceled_card, …) when it fails, as Stripe
// does when a pending refund completes or a card's refund fails later.
func (s *Server) SettleRefund(id, status, failureReason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	re := s.refunds[id]
	switch {
	case re == nil:
		return fmt.Errorf("stripefake: no refund %s", id)
	case status != "succeeded" && status != "failed" && status != "canceled":
		return fmt.Errorf("stripefake: a refund cannot be moved to %q", status)
	}
	re.Status, re.FailureReason = status, ""
	if status != "succeeded" {
		re.FailureReason = failureReason
	}
	return nil
}

// runRefund routes a request under /v1/refunds (rest is what follows).
func (s *Server) runRefund(r *http.Request, call Call, fault Fault, rest string) (int, []byte, bool) {
	id := strings.TrimPrefix(rest, "/")
	if fault == Error500 {
		return internalError()
	}
	switch {
	case r.Method == http.MethodPost && id == "":
		return s.createRefund(r.PostForm, call.IdempotencyKey, fault)
	case r.Method == http.MethodGet && id == "":
		return s.listRefunds(r.Form)
	case r.Method == http.MethodGet && !strings.Contains(id, "/"):
		s.mu.Lock()
		defer s.mu.Unlock()
		if re := s.refunds[id]; re != nil {
			return http.StatusOK, mustJSON(re), true
		}
		return notFound("No such refund: '" + id + "'")
	}
	return notFound("Unrecognized request URL")
}

func (s *Server) createRefund(form url.Values, key string, fault Fault) (int, []byte, bool) {
	invalid := func(code, param, msg string) (int, []byte, bool) {
		return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: code, Param: param, Message: msg}), false
	}
	var amount int64
	if a := form.Get("amount"); a != "" {
		var err error
		if amount, err = strconv.ParseInt(a, 10, 64); err != nil || amount <= 0 {
			return invalid("parameter_invalid_integer", "amount", "Invalid integer")
		}
	}
	reason := form.Get("reason")
	if reason != "" && !slices.Contains(stripeReasons, reason) {
		return invalid("parameter_invalid_string", "reason", "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer")
	}
	piID := form.Get("payment_intent")
	if piID == "" {
		// The fake's PaymentIntents have no Charge objects to refund by.
		return invalid("parameter_missing", "payment_intent", "Missing required param: payment_intent.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.intents[piID]
	if pi == nil {
		return notFound("No such payment_intent: '" + piID + "'")
	}
	if pi.Status != "succeeded" {
		return unexpectedState(pi, "refund")
	}
	left := pi.AmountReceived - s.refundedLocked(pi.ID)
	switch {
	case left == 0:
		return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: "charge_already_refunded",
			Message: "The charge of PaymentIntent " + pi.ID + " has already been refunded."}), true
	case amount == 0:
		amount = left
	case amount > left:
		return http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Code: "amount_too_large", Param: "amount",
			Message: fmt.Sprintf("Refund amount (%d) is greater than unrefunded amount on charge (%d)", amount, left)}), true
	}
	s.seq++
	re := &refund{
		ID: fmt.Sprintf("re_fake%06d%s", s.seq, randomID()[:8]), Object: "refund", Amount: amount,
		Currency: pi.Currency, Status: "succeeded", Created: time.Now().Unix(), Metadata: formMetadata(form),
		PaymentIntent: pi.ID, key: key,
	}
	if reason != "" {
		re.Reason = &reason
	}
	if pi.PaymentMethod == RefundPendingCard {
		re.Status = "pending"
	}
	s.refunds[re.ID] = re
	s.refundOrder = append(s.refundOrder, re)
	if fault == Error500AfterCreate {
		return internalError()
	}
	return http.StatusOK, mustJSON(re), true
}

// refundedLocked is how much of PaymentIntent id its refunds hold: all
// but the failed and cancelled ones.
func (s *Server) refundedLocked(id string) int64 {
	var sum int64
	for _, re := range s.refundOrder {
		if re.PaymentIntent == id && re.Status != "failed" && re.Status != "canceled" {
			sum += re.Amount
		}
	}
	return sum
}

func (s *Server) listRefunds(form url.Values) (int, []byte, bool) {
	limit, err := strconv.Atoi(form.Get("limit"))
	if err != nil || limit < 1 || limit > 100 {
		limit = 10
	}
	pi, after := form.Get("payment_intent"), form.Get("starting_after")
	s.mu.Lock()
	defer s.mu.Unlock()
	// Newest first, as Stripe lists.
	var data []*refund
	skipping := after != ""
	for i := len(s.refundOrder) - 1; i >= 0; i-- {
		re := s.refundOrder[i]
		if skipping {
			skipping = re.ID != after
			continue
		}
		if pi == "" || re.PaymentIntent == pi {
			data = append(data, re)
		}
	}
	more := len(data) > limit
	if more {
		data = data[:limit]
	}
	return http.StatusOK, mustJSON(map[string]any{"object": "list", "url": "/v1/refunds",
		"has_more": more, "data": data}), true
}
