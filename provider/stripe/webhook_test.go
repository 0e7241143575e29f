package stripe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"

	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/provider/providertest"
	"chargeonce/provider/stripe/stripefake"
	"chargeonce/ratelimit"
)

const testWebhookSecret = "whsec_test_0123456789abcdef"

// rechecks is a Rechecker that records the attempts it is asked about.
type rechecks struct {
	mu  sync.Mutex
	ids []uuid.UUID
	err error
}

func (r *rechecks) Recheck(_ context.Context, id uuid.UUID) (payment.Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
	return payment.StatusSucceeded, r.err
}

func (r *rechecks) asked() []uuid.UUID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uuid.UUID(nil), r.ids...)
}

type hookBundle struct {
	*bundle
	rechecks *rechecks
	handler  http.Handler
}

func setupWebhook(t *testing.T) *hookBundle {
	t.Helper()
	b := setup(t)
	r := &rechecks{}
	h := WebhookHandler(WebhookConfig{Secret: testWebhookSecret, Payments: r,
		Logger: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return &hookBundle{bundle: b, rechecks: r, handler: h}
}

// signed signs payload as Stripe does, at t, with secret.
func signed(payload []byte, secret string, at time.Time) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

// deliver posts payload with the Stripe-Signature header sig and returns the status.
func deliver(h http.Handler, payload []byte, sig string) int {
	req := httptest.NewRequest(http.MethodPost, "/stripe/webhook", bytes.NewReader(payload))
	if sig != "" {
		req.Header.Set("Stripe-Signature", sig)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestWebhook_VerifiedEvent_RechecksTheAttemptOfItsPaymentIntent(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t)
	req := authRequest("pm_card_authenticationRequired")
	id := b.waiting(t, req)
	require.NoError(t, b.fake.CompleteAuthentication(id))
	for _, typ := range []string{"payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.canceled", "payment_intent.requires_action"} {
		payload := b.fake.Event(typ, id)
		require.Equal(t, http.StatusOK, deliver(b.handler, payload, signed(payload, testWebhookSecret, time.Now())), typ)
	}
	require.Equal(t, []uuid.UUID{req.AttemptID, req.AttemptID, req.AttemptID, req.AttemptID}, b.rechecks.asked(),
		"each event only makes chargeonce read the attempt")

	logs := b.logs.String()
	require.Contains(t, logs, "stripe_event_id=evt_fake")
	require.Contains(t, logs, "stripe_event_type=payment_intent.succeeded")
	require.NotContains(t, logs, req.Metadata["client_idempotency_key"], "never the body")
	require.NotContains(t, logs, testWebhookSecret)
}

func TestWebhook_BadSignatureOrBody_400AndNothingRead(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t)
	id := b.waiting(t, authRequest("pm_card_authenticationRequired"))
	payload := b.fake.Event("payment_intent.succeeded", id)
	tampered := bytes.Replace(payload, []byte(`"requires_action"`), []byte(`"succeeded"`), 1)
	big := append(bytes.Repeat([]byte(" "), WebhookMaxBodyBytes), payload...)
	for name, tt := range map[string]struct {
		payload []byte
		sig     string
	}{
		"no signature":             {payload, ""},
		"another secret":           {payload, signed(payload, "whsec_forged", time.Now())},
		"unreadable header":        {payload, "garbage"},
		"signed too long ago":      {payload, signed(payload, testWebhookSecret, time.Now().Add(-WebhookTolerance-time.Minute))},
		"body changed after":       {tampered, signed(payload, testWebhookSecret, time.Now())},
		"signed, but not an event": {[]byte(`{"object":"payment_intent"}`), signed([]byte(`{"object":"payment_intent"}`), testWebhookSecret, time.Now())},
	} {
		require.Equal(t, http.StatusBadRequest, deliver(b.handler, tt.payload, tt.sig), name)
	}
	require.Equal(t, http.StatusRequestEntityTooLarge, deliver(b.handler, big, signed(big, testWebhookSecret, time.Now())),
		"larger than the limit, even signed")
	require.Empty(t, b.rechecks.asked(), "nothing read")
	logs := b.logs.String()
	for reason, detail := range map[string]string{
		"no_signature":         "no Stripe-Signature header",
		"signature_mismatch":   "no signature matches STRIPE_WEBHOOK_SECRET",
		"unreadable_signature": "unreadable Stripe-Signature header",
		"signature_too_old":    "signature older than 5m0s",
		"not_an_event":         "signed, but not a readable event",
		"too_large":            "body larger than 65536 bytes",
	} {
		require.Contains(t, logs, "reason="+reason+` detail="`+detail+`"`, "each reason logged")
	}
	require.NotContains(t, logs, "whsec_forged")
}

// TestWebhook_PerAddressLimit_429WithRetryAfter: past its burst an address
// is refused before anything is read, and told when to come back; another
// address keeps its own allowance.
func TestWebhook_PerAddressLimit_429WithRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := &rechecks{}
	m := metrics.New(prometheus.NewRegistry())
	h := WebhookHandler(WebhookConfig{Secret: testWebhookSecret, Payments: r, Limiter: ratelimit.New(0.5, 3, 0), Metrics: m,
		Logger: slog.New(slog.NewTextHandler(b.logs, nil))})
	id := b.waiting(t, authRequest("pm_card_authenticationRequired"))
	payload := b.fake.Event("payment_intent.succeeded", id)
	from := func(addr, sig string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/stripe/webhook", bytes.NewReader(payload))
		req.RemoteAddr = addr
		req.Header.Set("Stripe-Signature", sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 3 {
		require.Equal(t, http.StatusBadRequest, from("192.0.2.7:1000", "t=1,v1=00").Code, "request %d, within the burst", i)
	}
	limited := from("192.0.2.7:1001", signed(payload, testWebhookSecret, time.Now()))
	require.Equal(t, http.StatusTooManyRequests, limited.Code, "even signed: refused before it is read")
	require.Equal(t, "2", limited.Header().Get("Retry-After"), "one token every 2 s")
	require.Empty(t, r.asked())
	require.Equal(t, http.StatusOK, from("192.0.2.8:1000", signed(payload, testWebhookSecret, time.Now())).Code, "another address")
	require.Len(t, r.asked(), 1)
	require.Equal(t, 1.0, testutil.ToFloat64(m.StripeWebhookRefused.WithLabelValues("rate_limited")))
	require.Equal(t, 3.0, testutil.ToFloat64(m.StripeWebhookRefused.WithLabelValues("signature_too_old")))
}

var suppressedField = regexp.MustCompile(`suppressed=(\d+)`)

// TestWebhook_Refusals_LoggedSampledWithWhatWasLeftOut: a flood of one
// reason makes one WARN line an interval, and each line says how many it
// left out since the one before: no refusal goes uncounted.
func TestWebhook_Refusals_LoggedSampledWithWhatWasLeftOut(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	const interval = 200 * time.Millisecond
	h := WebhookHandler(WebhookConfig{Secret: testWebhookSecret, Payments: &rechecks{}, RefusalLogInterval: interval,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	payload := []byte(`{"id":"evt_1","object":"event"}`)
	lines := func() []string {
		var out []string
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, "refused a Stripe webhook request") {
				out = append(out, l)
			}
		}
		return out
	}
	sent := 0
	started := time.Now()
	for range 40 {
		require.Equal(t, http.StatusBadRequest, deliver(h, payload, ""))
		sent++
	}
	require.LessOrEqual(t, len(lines()), 1+int(time.Since(started)/interval), "one line an interval, not one a request")
	// Refusals go on until the next interval's line: it carries the rest.
	first := len(lines())
	for deadline := time.Now().Add(10 * time.Second); len(lines()) == first; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "no line after the interval")
		require.Equal(t, http.StatusBadRequest, deliver(h, payload, ""))
		sent++
	}
	total := 0
	for _, l := range lines() {
		require.Contains(t, l, "level=WARN")
		require.Contains(t, l, "reason=no_signature")
		m := suppressedField.FindStringSubmatch(l)
		require.NotNil(t, m, l)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		total += 1 + n
	}
	require.Equal(t, sent, total, "every refusal is a line or counted in the next one")
	require.Equal(t, "0", suppressedField.FindStringSubmatch(lines()[0])[1], "the first refusal is logged at once")
}

func TestWebhook_EventsItIgnores_200AndNothingRead(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t)
	id := b.waiting(t, authRequest("pm_card_authenticationRequired"))
	event := func(typ string, object any) []byte {
		raw, err := json.Marshal(map[string]any{"id": "evt_1", "object": "event", "type": typ, "data": map[string]any{"object": object}})
		require.NoError(t, err)
		return raw
	}
	for name, payload := range map[string][]byte{
		"another type":           b.fake.Event("payment_intent.created", id),
		"a charge":               event("charge.succeeded", map[string]any{"id": "ch_1", "object": "charge"}),
		"no attempt":             event("payment_intent.succeeded", map[string]any{"id": "pi_1", "object": "payment_intent", "metadata": map[string]string{}}),
		"not a uuid":             event("payment_intent.succeeded", map[string]any{"id": "pi_1", "metadata": map[string]string{MetadataAttemptID: "42"}}),
		"no object":              []byte(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}`),
		"a refund of no attempt": event("refund.updated", map[string]any{"id": "re_1", "object": "refund", "metadata": map[string]string{}}),
		"a charge's refund of no attempt": event("charge.refund.updated", map[string]any{"id": "re_1", "object": "refund",
			"metadata": map[string]string{"order_id": "order-42"}}),
	} {
		require.Equal(t, http.StatusOK, deliver(b.handler, payload, signed(payload, testWebhookSecret, time.Now())), name)
	}
	require.Empty(t, b.rechecks.asked())
}

func TestWebhook_RecheckFails_503SoThatStripeSendsItAgain(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t)
	b.rechecks.err = errors.New("database unreachable")
	id := b.waiting(t, authRequest("pm_card_authenticationRequired"))
	payload := b.fake.Event("payment_intent.succeeded", id)
	require.Equal(t, http.StatusServiceUnavailable, deliver(b.handler, payload, signed(payload, testWebhookSecret, time.Now())))
	require.Len(t, b.rechecks.asked(), 1)
	require.Contains(t, b.logs.String(), "Stripe will send it again")
}

func TestWebhook_NoSecret_503AndNothingRead(t *testing.T) {
	t.Parallel()
	r := &rechecks{}
	h := WebhookHandler(WebhookConfig{Payments: r})
	payload := []byte(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}`)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/stripe/webhook", bytes.NewReader(payload))
	req.Header.Set("Stripe-Signature", signed(payload, "", time.Now()))
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "an unsigned secret would accept anyone's event")
	require.True(t, strings.Contains(rec.Body.String(), "STRIPE_WEBHOOK_SECRET"))
	require.Empty(t, r.asked())
}

func TestWebhook_RefundEvents_RecheckTheAttemptOfTheRefund(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t)
	req := refundRequest(b.charged(t, stripefake.RefundPendingCard, 1999, "USD"), 1999, "USD", "")
	r, err := b.provider.CreateRefund(context.Background(), req)
	require.NoError(t, err)
	types := []string{"refund.created", "charge.refund.updated", "refund.updated", "refund.failed"}
	for _, typ := range types {
		payload := b.fake.Event(typ, r.ID)
		require.Equal(t, http.StatusOK, deliver(b.handler, payload, signed(payload, testWebhookSecret, time.Now())), typ)
	}
	require.Equal(t, []uuid.UUID{req.AttemptID, req.AttemptID, req.AttemptID, req.AttemptID}, b.rechecks.asked(),
		"each event only makes chargeonce read the refund attempt")
	require.Contains(t, b.logs.String(), "refund="+r.ID)

	forged := b.fake.Event("refund.updated", r.ID)
	require.Equal(t, http.StatusBadRequest, deliver(b.handler, forged, signed(forged, "whsec_forged", time.Now())))
	require.Len(t, b.rechecks.asked(), len(types), "a forged event reads nothing")
}

func TestWebhook_AuthorizationEvents_RecheckTheChargesAttempt_NotACaptures(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t)
	ctx := context.Background()
	authorize := func() (payment.ProviderChargeRequest, string) {
		req := providertest.ManualRequest("pm_card_visa", 1000, "USD")
		pc, err := b.provider.CreateCharge(ctx, req)
		require.NoError(t, err)
		return req, pc.ID
	}
	deliverEvent := func(typ, id string) {
		payload := b.fake.Event(typ, id)
		require.Equal(t, http.StatusOK, deliver(b.handler, payload, signed(payload, testWebhookSecret, time.Now())), typ)
	}

	captured, capturedID := authorize()
	deliverEvent("payment_intent.amount_capturable_updated", capturedID)
	// A capture writes its mark, named by its own attempt, into the
	// PaymentIntent's metadata; the event still names the charge's attempt.
	part := captureRequest(capturedID, 400, "USD", false)
	b.captured(t, part)
	require.Contains(t, string(b.fake.Event("payment_intent.amount_capturable_updated", capturedID)), `"amount_capturable":600`)
	deliverEvent("payment_intent.amount_capturable_updated", capturedID)

	voided, voidedID := authorize()
	_, err := b.provider.VoidCharge(ctx, voidRequest(voidedID))
	require.NoError(t, err)
	deliverEvent("payment_intent.canceled", voidedID)

	lapsed, lapsedID := authorize()
	require.NoError(t, b.fake.ExpireAuthorization(lapsedID))
	deliverEvent("payment_intent.canceled", lapsedID)

	require.Equal(t, []uuid.UUID{captured.AttemptID, captured.AttemptID, voided.AttemptID, lapsed.AttemptID}, b.rechecks.asked(),
		"each event only makes chargeonce read the charge's attempt")
	require.NotContains(t, b.rechecks.asked(), part.AttemptID)
}
