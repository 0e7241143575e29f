package stripefake

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// 3-D Secure and Stripe's events. A PaymentIntent confirmed with a
// return_url for a card that requires authentication waits at the fake's
// challenge page, challengePath + its id, as Stripe's does at
// hooks.stripe.com. The shopper (a test) completes or fails it there, by
// POST …/complete or …/fail, which answers 303 back to the return_url as
// Stripe does, or by CompleteAuthentication and FailAuthentication.
// Completed, it is charged (authorized, for a manual capture); failed, it
// goes back to requires_payment_method with last_payment_error.code
// payment_intent_authentication_failure. The
// page needs no secret key: it is the shopper's browser that comes.

// challengePath is where the challenge pages are.
const challengePath = "/redirect/authenticate/"

// EventAPIVersion is the API version of the events the fake renders: an
// account's pinned version, not stripe-go's, as an endpoint that was not
// created with stripe-go's version gets.
const EventAPIVersion = "2025-03-31.basil"

// challengeURL is the challenge page of PaymentIntent id.
func (s *Server) challengeURL(id string) string { return s.URL + challengePath + id }

// redirectURL is the challenge page that pi waits at, or "".
func redirectURL(pi *intent) string {
	if pi.Status != "requires_action" {
		return ""
	}
	if r, ok := pi.NextAction["redirect_to_url"].(map[string]any); ok {
		u, _ := r["url"].(string)
		return u
	}
	return ""
}

// CompleteAuthentication authenticates the shopper of PaymentIntent id,
// which waits at its challenge page: it succeeds.
func (s *Server) CompleteAuthentication(id string) error {
	_, err := s.authenticate(id, true)
	return err
}

// FailAuthentication fails the authentication of PaymentIntent id, which
// waits at its challenge page: it goes back to requires_payment_method with
// last_payment_error.code payment_intent_authentication_failure.
func (s *Server) FailAuthentication(id string) error {
	_, err := s.authenticate(id, false)
	return err
}

// authenticate ends the wait of PaymentIntent id at its challenge page and
// returns where the shopper is sent back to.
func (s *Server) authenticate(id string, ok bool) (back string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.intents[id]
	switch {
	case pi == nil:
		return "", fmt.Errorf("stripefake: no PaymentIntent %s", id)
	case redirectURL(pi) == "":
		return "", fmt.Errorf("stripefake: PaymentIntent %s does not wait at a challenge page (it is %s)", id, pi.Status)
	}
	pi.NextAction = nil
	status := "succeeded"
	if ok {
		s.chargeLocked(pi)
	} else {
		status = "failed"
		pi.Status = "requires_payment_method"
		pi.LastPaymentError = &stripeError{Type: "invalid_request_error", Code: "payment_intent_authentication_failure",
			Message: "The provided PaymentMethod has failed authentication. You can provide payment_method_data or a new PaymentMethod to attempt to fulfill this PaymentIntent again."}
	}
	u, err := url.Parse(pi.returnURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("payment_intent", pi.ID)
	q.Set("redirect_status", status)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// serveChallenge serves the challenge pages: GET shows the page, POST
// …/complete and …/fail end the wait and send the shopper back.
func (s *Server) serveChallenge(w http.ResponseWriter, r *http.Request) {
	id, button, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, challengePath), "/")
	switch {
	case r.Method == http.MethodGet && button == "":
		s.mu.Lock()
		pi := s.intents[id]
		waiting := pi != nil && redirectURL(pi) != ""
		s.mu.Unlock()
		if !waiting {
			http.Error(w, "no payment waits for authentication here", http.StatusNotFound)
			return
		}
		page := challengePath + html.EscapeString(id)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>3-D Secure (stripefake)</title>
<p>Authenticate the payment %s.</p>
<form method="post" action="%s/complete"><button>Complete</button></form>
<form method="post" action="%s/fail"><button>Fail</button></form>
`, html.EscapeString(id), page, page)
	case r.Method == http.MethodPost && (button == "complete" || button == "fail"):
		back, err := s.authenticate(id, button == "complete")
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		http.Redirect(w, r, back, http.StatusSeeOther)
	default:
		http.NotFound(w, r)
	}
}

// Event is the Stripe event of eventType (payment_intent.succeeded,
// refund.updated, …) for PaymentIntent or refund id as it is now, as Stripe
// sends it to a webhook endpoint, unsigned; nil when the fake holds no such
// object.
func (s *Server) Event(eventType, id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var object any
	if pi := s.intents[id]; pi != nil {
		object = pi
	} else if re := s.refunds[id]; re != nil {
		object = re
	} else {
		return nil
	}
	return mustJSON(map[string]any{
		"id": "evt_fake" + randomID(), "object": "event", "api_version": EventAPIVersion,
		"created": time.Now().Unix(), "livemode": false, "pending_webhooks": 1,
		"request": map[string]any{"id": nil, "idempotency_key": nil},
		"type":    eventType, "data": map[string]any{"object": object},
	})
}
