// Package stripefake is a local stand-in for the parts of Stripe's API that
// chargeonce uses, for tests: PaymentIntents created and confirmed in one
// call, read, listed, confirmed and cancelled, authorized and captured in
// one or several parts (captures.go), and their refunds (created, read and
// listed; refunds.go), with Stripe's idempotency. A
// POST's answer is saved per Idempotency-Key and replayed for a repeat with
// the header Idempotent-Replayed: true (a 500 included); a repeat with other
// parameters gets 400 idempotency_error; a repeat while the first is running
// gets 409 idempotency_key_in_use. Requests that Stripe refuses before it
// runs them (400 validation errors, 401, 409, 429) save nothing.
//
// Stripe's test payment methods behave as at Stripe: pm_card_visa succeeds,
// pm_card_chargeDeclined (and …InsufficientFunds, …ExpiredCard) are
// declined with a 402 card_error, pm_card_authenticationRequired and
// pm_card_threeDSecure2Required require action (3-D Secure): confirmed with
// a return_url, they wait at the fake's own challenge page
// (next_action.redirect_to_url), where the test, as the shopper, completes
// or fails the authentication (authentication.go); without one they wait
// for Stripe.js (use_stripe_sdk). Event renders the Stripe event of a
// PaymentIntent or a refund as it is, for a test to sign and deliver. Tests
// inject the rest (timeouts, 5xx, lost answers, a shopper who completes
// just before a cancel, keys Stripe has forgotten, an authorization that
// lapses) with Script, FailCreates, FailRefunds, FailCaptures, FailCancels,
// ForgetKeys, SetMulticapture and ExpireAuthorization.
//
// stripe-mock checks that chargeonce's requests are ones Stripe accepts, but
// it keeps no state; this fake keeps state, and counts PaymentIntents and
// refunds per idempotency key and per attempt, but only approximates
// Stripe's answers.
package stripefake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// SecretKeyDefault is the key the fake accepts unless New is given another.
const SecretKeyDefault = "sk_test_stripefake0000000000000000"

// Fault is what the fake does with a request instead of, or besides,
// answering it as Stripe would.
type Fault int

const (
	// None: answer as Stripe would.
	None Fault = iota
	// Unavailable: 503 before anything runs; nothing is saved.
	Unavailable
	// RateLimited: 429; nothing is saved.
	RateLimited
	// InUse: 409 idempotency_key_in_use, as while another send of the key
	// runs; nothing is saved.
	InUse
	// Error500: a 500 from a request that began to run and did nothing;
	// Stripe saves it and replays it for every later send of the key.
	Error500
	// Error500AfterCreate: the PaymentIntent is created but never
	// confirmed (a refund, a capture, a cancel: it is made), and a 500 is
	// saved for the key.
	Error500AfterCreate
	// CutAfterRun: the request runs (and its answer is saved), then the
	// connection is cut before the answer is written: a lost response.
	CutAfterRun
	// Slow: the answer is written after Server.SlowDelay.
	Slow
	// NotFound: 404 resource_missing, as for a route or object Stripe does
	// not know; nothing is saved.
	NotFound
	// CompletesFirst: the shopper completes the authentication of the
	// request's PaymentIntent just before the request runs, as when a
	// cancel races the shopper's return from the bank.
	CompletesFirst
)

// Call is a request the fake received, as a Script sees it and as Requests
// lists it.
type Call struct {
	Method         string
	Path           string
	IdempotencyKey string
	Form           url.Values
	// Status is the HTTP status answered (0 for a cut connection), and
	// Replayed whether it was a saved answer.
	Status   int
	Replayed bool
}

// Server is a running fake; Close stops it.
type Server struct {
	URL       string
	SecretKey string
	// SlowDelay is how long a Slow fault waits (default 2s).
	SlowDelay time.Duration

	srv *httptest.Server

	mu          sync.Mutex
	script      func(Call) Fault
	intents     map[string]*intent
	order       []*intent // in creation order
	refunds     map[string]*refund
	refundOrder []*refund // in creation order
	saved       map[string]*saved
	calls       []Call
	seq         int
	// noMulticapture: authorizations made are never capturable in parts.
	noMulticapture bool
}

// saved is the answer saved for an idempotency key.
type saved struct {
	fingerprint string
	running     bool
	status      int
	body        []byte
}

// Start starts a fake with the default secret key for t, closed when t
// ends.
func Start(t testing.TB) *Server {
	s := New("")
	t.Cleanup(s.Close)
	return s
}

// New starts a fake that accepts secretKey ("" for SecretKeyDefault).
func New(secretKey string) *Server {
	if secretKey == "" {
		secretKey = SecretKeyDefault
	}
	s := &Server{SecretKey: secretKey, SlowDelay: 2 * time.Second,
		intents: map[string]*intent{}, refunds: map[string]*refund{}, saved: map[string]*saved{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the fake.
func (s *Server) Close() { s.srv.Close() }

// Script decides the fault of each request from now on (nil: none).
func (s *Server) Script(f func(Call) Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = f
}

// FailCreates makes the next n create requests fail with f, then lets the
// rest through.
func (s *Server) FailCreates(f Fault, n int) { s.failPosts("/v1/payment_intents", f, n) }

// FailRefunds makes the next n refund requests fail with f, then lets the
// rest through.
func (s *Server) FailRefunds(f Fault, n int) { s.failPosts("/v1/refunds", f, n) }

func (s *Server) failPosts(path string, f Fault, n int) {
	left := n
	s.Script(func(c Call) Fault {
		if c.Method == http.MethodPost && c.Path == path && left > 0 {
			left--
			return f
		}
		return None
	})
}

// ForgetKeys forgets every saved answer, as Stripe does a key's after 24
// hours: a later send of a key runs anew. A send still running keeps its
// key.
func (s *Server) ForgetKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.DeleteFunc(s.saved, func(_ string, v *saved) bool { return !v.running })
}

// Calls lists the requests received so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Intent is a PaymentIntent the fake holds.
type Intent struct {
	ID             string
	Status         string
	Amount         int64
	Currency       string
	Metadata       map[string]string
	IdempotencyKey string
	// NextActionURL is the challenge page of a PaymentIntent that waits for
	// the shopper at a redirect; CancellationReason is set once cancelled.
	NextActionURL      string
	CancellationReason string
	// CaptureMethod is automatic or manual; AmountCapturable and
	// AmountReceived are as Stripe renders them; an authorization's charge
	// says Multicapture (available or unavailable) and CaptureBefore.
	CaptureMethod    string
	AmountCapturable int64
	AmountReceived   int64
	Multicapture     string
	CaptureBefore    time.Time
}

// Intents lists the PaymentIntents, oldest first.
func (s *Server) Intents() []Intent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Intent, len(s.order))
	for i, pi := range s.order {
		out[i] = Intent{ID: pi.ID, Status: pi.Status, Amount: pi.Amount, Currency: pi.Currency,
			Metadata: maps.Clone(pi.Metadata), IdempotencyKey: pi.key, NextActionURL: redirectURL(pi),
			CaptureMethod: pi.CaptureMethod, AmountCapturable: pi.AmountCapturable, AmountReceived: pi.AmountReceived}
		if pi.CancellationReason != nil {
			out[i].CancellationReason = *pi.CancellationReason
		}
		if pi.charge != nil {
			card := pi.charge.PaymentMethodDetails.Card
			if card.Multicapture != nil {
				out[i].Multicapture = card.Multicapture.Status
			}
			if card.CaptureBefore != nil {
				out[i].CaptureBefore = time.Unix(*card.CaptureBefore, 0).UTC()
			}
		}
	}
	return out
}

// IntentsFor lists the PaymentIntents whose metadata has key = value (e.g.
// chargeonce_attempt_id, or client_idempotency_key).
func (s *Server) IntentsFor(key, value string) []Intent {
	var out []Intent
	for _, pi := range s.Intents() {
		if pi.Metadata[key] == value {
			out = append(out, pi)
		}
	}
	return out
}

// ClientIntents lists the PaymentIntents of a chargeonce client's
// idempotency key (the metadata chargeonce gives each).
func (s *Server) ClientIntents(clientKey string) []Intent {
	return s.IntentsFor("client_idempotency_key", clientKey)
}

// CreateKeys lists the Idempotency-Key of every create request received.
func (s *Server) CreateKeys() []string {
	var keys []string
	for _, c := range s.Calls() {
		if c.Method == http.MethodPost && c.Path == "/v1/payment_intents" {
			keys = append(keys, c.IdempotencyKey)
		}
	}
	return keys
}

// Env is the environment that points a chargeonce server at the fake,
// with the variables of over (a server's own) on top.
func (s *Server) Env(over ...map[string]string) map[string]string {
	env := map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": s.SecretKey, "STRIPE_API_BASE": s.URL}
	for _, o := range over {
		maps.Copy(env, o)
	}
	return env
}

// SetStatus moves a PaymentIntent to status, as Stripe does when a
// processing payment completes: to succeeded (or requires_capture) it is
// charged as a card that succeeds would be.
func (s *Server) SetStatus(id, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.intents[id]
	switch {
	case pi == nil:
	case (status == "succeeded" || status == "requires_capture") && pi.charge == nil:
		s.chargeLocked(pi)
	default:
		pi.Status = status
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, challengePath) {
		// The shopper's browser, not the API: no key, not a Call.
		s.serveChallenge(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(stripeError{Type: "invalid_request_error", Message: "unreadable form"}), false)
		return
	}
	call := Call{Method: r.Method, Path: r.URL.Path, IdempotencyKey: r.Header.Get("Idempotency-Key"), Form: r.Form}
	s.mu.Lock()
	fault := None
	if s.script != nil {
		fault = s.script(call)
	}
	s.mu.Unlock()
	status, body, replayed, cut := s.handle(r, call, fault)
	call.Status, call.Replayed = status, replayed
	if cut {
		call.Status = 0
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	if fault == Slow {
		select {
		case <-time.After(s.SlowDelay):
		case <-r.Context().Done():
			return
		}
	}
	if cut {
		// The answer is lost: the connection breaks before it is written,
		// but for a few bytes of its status line. Without them, net/http
		// would send a POST with an Idempotency-Key again on its own when
		// the connection was a reused one, and the loss would never show.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_, _ = conn.Write([]byte("HTTP/1.1 "))
			conn.Close()
			return
		}
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Request-Id", "req_"+randomID())
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// handle runs a request with Stripe's idempotency around its POSTs.
func (s *Server) handle(r *http.Request, call Call, fault Fault) (status int, body []byte, replayed, cut bool) {
	if r.Header.Get("Authorization") != "Bearer "+s.SecretKey {
		// Stripe masks the key it quotes; this fake quotes it whole, so that
		// a test sees it if chargeonce ever passes Stripe's text on.
		return http.StatusUnauthorized, errorBody(stripeError{Type: "invalid_request_error",
			Message: "Invalid API Key provided: " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}), false, false
	}
	switch fault {
	case Unavailable:
		return http.StatusServiceUnavailable, errorBody(stripeError{Type: "api_error", Message: "unavailable"}), false, false
	case RateLimited:
		return http.StatusTooManyRequests, errorBody(stripeError{Type: "invalid_request_error", Code: "rate_limit",
			Message: "Too many requests"}), false, false
	case InUse:
		return inUse()
	case NotFound:
		status, body, _ := notFound("Unrecognized request URL")
		return status, body, false, false
	}
	if r.Method != http.MethodPost || call.IdempotencyKey == "" {
		status, body, _ = s.run(r, call, fault)
		return status, body, false, fault == CutAfterRun
	}

	fp := fingerprint(r.URL.Path, r.PostForm)
	s.mu.Lock()
	prev := s.saved[call.IdempotencyKey]
	switch {
	case prev != nil && prev.running:
		s.mu.Unlock()
		return inUse()
	case prev != nil && prev.fingerprint != fp:
		s.mu.Unlock()
		return http.StatusBadRequest, errorBody(stripeError{Type: "idempotency_error",
			Message: "Keys for idempotent requests can only be used with the same parameters they were first used with."}), false, false
	case prev != nil:
		s.mu.Unlock()
		return prev.status, prev.body, true, fault == CutAfterRun
	}
	entry := &saved{fingerprint: fp, running: true}
	s.saved[call.IdempotencyKey] = entry
	s.mu.Unlock()

	status, body, keep := s.run(r, call, fault)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !keep {
		delete(s.saved, call.IdempotencyKey)
	} else {
		entry.running, entry.status, entry.body = false, status, body
	}
	return status, body, false, fault == CutAfterRun
}

func inUse() (int, []byte, bool, bool) {
	return http.StatusConflict, errorBody(stripeError{Type: "invalid_request_error", Code: "idempotency_key_in_use",
		Message: "There is currently another in-progress request using this Idempotent Key."}), false, false
}

func errorBody(e stripeError) []byte { return mustJSON(map[string]any{"error": e}) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func writeJSON(w http.ResponseWriter, status int, body []byte, replayed bool) {
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// fingerprint identifies a POST's parameters, whatever their order.
func fingerprint(path string, form url.Values) string { return path + "?" + form.Encode() }

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
