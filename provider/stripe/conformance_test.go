package stripe

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
)

// StripeMockVersion is the stripe-mock the conformance test runs: it serves
// Stripe's OpenAPI description and refuses any request the description does
// not allow. .ci/run installs it; the test installs it into a temporary
// directory when it is neither on PATH nor in $(go env GOPATH)/bin.
const StripeMockVersion = "v0.203.0"

// TestConformance_EveryRequestIsOneStripeAccepts sends every kind of
// request the adapter makes (create and confirm, with a return_url or
// without, to capture automatically or manually, confirm, retrieve with the
// latest charge, list, cancel; a refund, its list and its read; a capture,
// final or not, and a void) to stripe-mock, and checks that it accepted
// each, and that every POST carried an Idempotency-Key derived from our
// provider key.
func TestConformance_EveryRequestIsOneStripeAccepts(t *testing.T) {
	t.Parallel()
	base := startStripeMock(t)
	rec := &recorder{next: http.DefaultTransport}
	p := New(Config{SecretKey: "sk_test_conformance", APIBase: base, Transport: rec, Timeout: 10 * time.Second})
	ctx := context.Background()

	// Negative control: stripe-mock does refuse what Stripe would.
	badReq, err := http.NewRequest(http.MethodPost, base+"/v1/payment_intents",
		strings.NewReader(url.Values{"amount": {"many"}, "currency": {"usd"}}.Encode()))
	require.NoError(t, err)
	badReq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	badReq.Header.Set("Authorization", "Bearer sk_test_conformance")
	bad, err := http.DefaultClient.Do(badReq)
	require.NoError(t, err)
	bad.Body.Close()
	require.Equal(t, http.StatusBadRequest, bad.StatusCode, "stripe-mock validates requests")

	// Create and confirm, in each shape the adapter sends: with and without
	// a description and an order, in a two-, zero- and three-decimal
	// currency. stripe-mock answers with a fixture, not with what Stripe
	// would do: the outcomes are logged, not checked; what is checked is that
	// each request was accepted.
	for _, req := range []payment.ProviderChargeRequest{
		request("pm_card_visa", 1999, "USD"),
		func() payment.ProviderChargeRequest {
			r := request("pm_card_chargeDeclined", 500, "ISK")
			r.Description = ""
			delete(r.Metadata, "order_id")
			return r
		}(),
		request("pm_card_visa", 1230, "KWD"),
		withReturnURL(request("pm_card_authenticationRequired", 1999, "EUR")),
		providertest.ManualRequest("pm_card_visa", 1999, "USD"),
		withReturnURL(providertest.ManualRequest("pm_card_authenticationRequired", 1999, "EUR")),
	} {
		pc, err := p.CreateCharge(ctx, req)
		t.Logf("%s %d: %+v, %v", req.Currency, req.Amount, pc, err)
		// The lookup lists; its fixtures carry no attempt id, so it reads nothing.
		found, err := p.FindCharges(ctx, req)
		require.NoError(t, err)
		require.Empty(t, found)
	}
	// Read by id; confirm a PaymentIntent that was never confirmed; cancel
	// one that requires 3-D Secure.
	req := request("pm_card_authenticationRequired", 1999, "EUR")
	_, err = p.retrieve(ctx, "pi_123")
	require.NoError(t, err)
	pc, err := p.settle(ctx, req, &stripego.PaymentIntent{ID: "pi_123", Status: stripego.PaymentIntentStatusRequiresConfirmation})
	t.Logf("confirm: %+v, %v", pc, err)
	pc, err = p.settle(ctx, withReturnURL(req), &stripego.PaymentIntent{ID: "pi_123", Status: stripego.PaymentIntentStatusRequiresConfirmation})
	t.Logf("confirm with a return_url: %+v, %v", pc, err)
	pc, err = p.refuseAuthentication(ctx, req, &stripego.PaymentIntent{ID: "pi_123", Status: stripego.PaymentIntentStatusRequiresAction})
	t.Logf("cancel: %+v, %v", pc, err)
	// Refund, with a reason Stripe takes, with one it does not (sent in the
	// metadata only) and with none; list the PaymentIntent's refunds; read
	// one.
	for _, reason := range []string{"requested_by_customer", "The shopper sent the shoes back", ""} {
		rreq := refundRequest(payment.ProviderCharge{ID: "pi_123"}, 500, "USD", reason)
		r, err := p.CreateRefund(ctx, rreq)
		t.Logf("refund (%q): %+v, %v", reason, r, err)
		found, err := p.FindRefund(ctx, rreq)
		require.NoError(t, err)
		require.Nil(t, found, "the list's fixtures carry no attempt id")
	}
	_, err = p.retrieveRefund(ctx, "re_123")
	require.NoError(t, err)
	// Capture, final and not (with multicapture, which stripe-mock's
	// fixture never says is available: sent as the adapter would then);
	// void; read them back and the authorization. stripe-mock's fixture
	// is no authorization, so VoidCharge and ReadAuthorization refuse it
	// unsent: the void's cancel is sent as VoidCharge would send it.
	final := providertest.CaptureRequest("pi_123", 500, "USD", true)
	c, err := p.CaptureCharge(ctx, final)
	t.Logf("capture: %+v, %v", c, err)
	part := providertest.CaptureRequest("pi_123", 400, "USD", false)
	c, err = p.sendCapture(ctx, part, "pi_123", captureParams(part, 400, true))
	t.Logf("capture, not final: %+v, %v", c, err)
	found, err := p.FindCapture(ctx, final)
	require.NoError(t, err)
	require.Nil(t, found, "stripe-mock's fixture holds no mark")
	void := providertest.VoidRequest("pi_123")
	v, err := p.sendVoid(ctx, void, "pi_123")
	t.Logf("void: %+v, %v", v, err)
	_, err = p.FindVoid(ctx, void)
	require.NoError(t, err)
	_, err = p.ReadAuthorization(ctx, "pi_123")
	t.Logf("authorization: %v", err)

	calls := rec.all()
	kinds := map[string]bool{}
	for _, c := range calls {
		require.Less(t, c.status, 300, "stripe-mock refused %s %s: %s", c.method, c.path, c.body)
		kind := c.method + " " + regexp.MustCompile(`/(pi|re)_[A-Za-z0-9]+`).ReplaceAllString(c.path, "/{id}")
		kinds[kind] = true
		if c.method == http.MethodPost {
			require.Regexp(t, `^chargeonce_[0-9a-f-]{36}(_confirm|_cancel)?$`, c.idempotencyKey, "%s: an Idempotency-Key derived from our provider key", kind)
		}
		require.Equal(t, "Bearer sk_test_conformance", c.authorization)
	}
	require.Equal(t, map[string]bool{
		"POST /v1/payment_intents":              true,
		"POST /v1/payment_intents/{id}/confirm": true,
		"POST /v1/payment_intents/{id}/cancel":  true,
		"POST /v1/payment_intents/{id}/capture": true,
		"GET /v1/payment_intents":               true,
		"GET /v1/payment_intents/{id}":          true,
		"POST /v1/refunds":                      true,
		"GET /v1/refunds":                       true,
		"GET /v1/refunds/{id}":                  true,
	}, kinds, "every kind of request the adapter makes")
	returnURLs, manual, captures := 0, 0, 0
	for _, c := range calls {
		if c.method == http.MethodPost && (c.path == "/v1/payment_intents" || strings.HasSuffix(c.path, "/confirm")) {
			form, err := url.ParseQuery(c.body)
			require.NoError(t, err)
			if form.Get("return_url") != "" {
				returnURLs++
				require.Empty(t, form.Get("use_stripe_sdk"), "3-D Secure as a redirect")
			}
		}
		if c.method == http.MethodPost && c.path == "/v1/payment_intents" {
			form, err := url.ParseQuery(c.body)
			require.NoError(t, err)
			require.Equal(t, "true", form.Get("confirm"))
			require.Equal(t, "card", form.Get("payment_method_types[0]"))
			require.NotEmpty(t, form.Get("metadata[chargeonce_attempt_id]"))
			if form.Get("capture_method") == "manual" {
				manual++
				require.Equal(t, "if_available", form.Get("payment_method_options[card][request_multicapture]"))
			}
		}
		if c.method == http.MethodPost && strings.HasSuffix(c.path, "/capture") {
			form, err := url.ParseQuery(c.body)
			require.NoError(t, err)
			captures++
			require.NotEmpty(t, form.Get("amount_to_capture"))
			require.Len(t, form, 2+len(form["final_capture"]), "the amount, the mark and, for a part, final_capture: %v", form)
		}
		if c.method == http.MethodPost && strings.HasSuffix(c.path, "/cancel") && c.idempotencyKey == void.IdempotencyKey {
			require.Equal(t, "cancellation_reason=requested_by_customer", c.body)
		}
		if c.method == http.MethodGet && strings.HasPrefix(c.path, "/v1/payment_intents/") {
			q, err := url.ParseQuery(c.query)
			require.NoError(t, err)
			require.Equal(t, "latest_charge", q.Get("expand[0]"), "read with the charge, which says how it stands")
		}
		if c.method == http.MethodPost && c.path == "/v1/refunds" {
			form, err := url.ParseQuery(c.body)
			require.NoError(t, err)
			require.Equal(t, "pi_123", form.Get("payment_intent"))
			require.Equal(t, "500", form.Get("amount"))
			require.NotEmpty(t, form.Get("metadata[chargeonce_attempt_id]"))
			require.True(t, form.Get("reason") == "" || stripeReasons[form.Get("reason")], "a reason Stripe takes, or none")
		}
		if c.method == http.MethodGet && c.path == "/v1/refunds" {
			q, err := url.ParseQuery(c.query)
			require.NoError(t, err)
			require.Equal(t, "pi_123", q.Get("payment_intent"), "the PaymentIntent's refunds only")
		}
		if c.method == http.MethodGet && c.path == "/v1/payment_intents" {
			q, err := url.ParseQuery(c.query)
			require.NoError(t, err)
			require.NotEmpty(t, q.Get("created[gte]"), "the list is bounded by the attempt's creation")
		}
	}
	require.Equal(t, 3, returnURLs, "two creates and a confirm with a return_url, all accepted")
	require.Equal(t, 2, manual, "manual creates, accepted")
	require.Equal(t, 2, captures, "a final capture and a part, accepted")
}

// withReturnURL is req with a return URL, as a charge that may send the
// shopper to their bank has.
func withReturnURL(req payment.ProviderChargeRequest) payment.ProviderChargeRequest {
	req.ReturnURL = "https://shop.example/return?" + payment.ReturnKeyParam + "=checkout-1"
	return req
}

// recorder is an http.RoundTripper that keeps every request and its status.
type recorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	calls []recorded
}

type recorded struct {
	method, path, query, body, idempotencyKey, authorization string
	status                                                   int
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	c := recorded{method: req.Method, path: req.URL.Path, query: req.URL.RawQuery,
		idempotencyKey: req.Header.Get("Idempotency-Key"), authorization: req.Header.Get("Authorization")}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		c.body = string(b)
	}
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		c.status = resp.StatusCode
		if resp.StatusCode >= 300 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(bytes.NewReader(b))
			c.body += " → " + string(b)
		}
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.calls...)
}

// startStripeMock runs stripe-mock on free loopback ports until the test
// ends and returns its HTTP URL.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin := stripeMockBinary(t)
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		listening := regexp.MustCompile(`Listening for HTTP at address: (\S+)`)
		s := bufio.NewScanner(out)
		for s.Scan() {
			if m := listening.FindStringSubmatch(s.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("stripe-mock did not start listening within 60s")
		return ""
	}
}

var (
	stripeMockOnce sync.Once
	stripeMockPath string
	stripeMockErr  error
)

// stripeMockBinary finds stripe-mock on PATH or in $(go env GOPATH)/bin, or
// installs it into a temporary directory. Missing, the test is skipped,
// except under CI=true, where it fails.
func stripeMockBinary(t *testing.T) string {
	t.Helper()
	stripeMockOnce.Do(func() {
		if p, err := exec.LookPath("stripe-mock"); err == nil {
			stripeMockPath = p
			return
		}
		if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "stripe-mock")
			if _, err := os.Stat(p); err == nil {
				stripeMockPath = p
				return
			}
		}
		dir, err := os.MkdirTemp("", "stripe-mock-")
		if err != nil {
			stripeMockErr = err
			return
		}
		install := exec.Command("go", "install", "github.com/stripe/stripe-mock@"+StripeMockVersion)
		install.Env = append(os.Environ(), "GOBIN="+dir)
		if out, err := install.CombinedOutput(); err != nil {
			stripeMockErr = &installError{err: err, out: string(out)}
			return
		}
		stripeMockPath = filepath.Join(dir, "stripe-mock")
	})
	if stripeMockErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("stripe-mock is needed under CI=true: %v", stripeMockErr)
		}
		t.Skipf("stripe-mock not found and could not be installed (go install github.com/stripe/stripe-mock@%s): %v",
			StripeMockVersion, stripeMockErr)
	}
	return stripeMockPath
}

type installError struct {
	err error
	out string
}

func (e *installError) Error() string { return e.err.Error() + ": " + e.out }
