package stripe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	stripego "github.com/stripe/stripe-go/v85"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"
	"golang.org/x/time/rate"

	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/ratelimit"
)

// Stripe's webhook events, heard at an endpoint of chargeonce's. An event
// says that a PaymentIntent or a refund changed; it never decides an
// outcome. Its signature is checked against the endpoint's signing secret,
// the attempt is taken from its object's metadata (MetadataAttemptID), and
// chargeonce reads the attempt from Stripe at once (Rechecker): so a forged
// event is refused, and a redelivered, late or reordered one can only make
// chargeonce read Stripe again.

// WebhookMaxBodyBytes bounds what the endpoint reads of a request before
// it verifies the signature; a larger body is refused (413) unread. An
// event is one small JSON object: in stripe-go's fixtures (stripe-mock's
// fixtures3.json) a PaymentIntent is about 1.4 KB, a refund 0.5 KB and the
// largest object of any kind 4.5 KB, and Stripe sends an event pretty-printed
// with its previous_attributes. What can make one large is metadata, at most
// 50 keys of 40 characters with values of 500 (about 27 KB): 64 KiB holds
// the largest event of the kinds chargeonce hears (webhookEvents) with room
// to spare, and a quarter of what was read before.
const WebhookMaxBodyBytes = 64 << 10

// Defaults of the per-address limit of the endpoint (RATE_LIMIT_STRIPE_WEBHOOK_IP
// and _BURST). Stripe sends every account's events from a dozen published
// addresses (https://docs.stripe.com/ips), so a limit per address must
// never refuse Stripe's own traffic: 50 events a second from one of its
// addresses, with bursts of 200, is more than a merchant's payments make
// (each attempt makes a handful of events, and Stripe's API itself allows
// about 100 writes a second in live mode), while a stranger posting forged
// events gets no more than that. A refused event is not lost: Stripe
// retries it (for up to three days), and the polls and the reconciler find
// every outcome anyway.
const (
	WebhookRateLimitDefault      = 50
	WebhookRateLimitBurstDefault = 200
)

// WebhookRefusalLogIntervalDefault is how often at most the endpoint logs
// a refusal of one reason: a flood of forged posts makes one WARN line per
// reason and interval, which says how many it left out.
const WebhookRefusalLogIntervalDefault = 10 * time.Second

// WebhookTolerance is how old a signature may be: an event signed longer
// ago is refused, so that a captured one cannot be replayed for long.
const WebhookTolerance = stripewebhook.DefaultTolerance

// webhookEvents are the events that may end an attempt's wait, for the
// shopper or for a pending refund, or change an authorization (made:
// amount_capturable_updated; voided or lapsed: canceled), each with the
// kind of its object (that of charge.refund.updated is a refund too); the
// endpoint answers any other with 200 and reads nothing. An event of a
// PaymentIntent names the charge's attempt, whatever its captures wrote
// into its metadata.
var webhookEvents = map[stripego.EventType]string{
	stripego.EventTypePaymentIntentSucceeded:               "payment_intent",
	stripego.EventTypePaymentIntentPaymentFailed:           "payment_intent",
	stripego.EventTypePaymentIntentCanceled:                "payment_intent",
	stripego.EventTypePaymentIntentRequiresAction:          "payment_intent",
	stripego.EventTypePaymentIntentAmountCapturableUpdated: "payment_intent",
	stripego.EventTypeChargeRefundUpdated:                  "refund",
	stripego.EventTypeRefundCreated:                        "refund",
	stripego.EventTypeRefundUpdated:                        "refund",
	stripego.EventTypeRefundFailed:                         "refund",
}

// Rechecker reads the provider about an attempt, a charge's or a refund's,
// at once, and records its outcome if final (payment.Service.Recheck); it
// never sends.
type Rechecker interface {
	Recheck(ctx context.Context, attemptID uuid.UUID) (payment.Status, error)
}

// WebhookConfig configures a WebhookHandler.
type WebhookConfig struct {
	// Secret is the endpoint's signing secret (whsec_…). Empty: every
	// request is answered 503, and nothing is read.
	Secret string
	// Payments reads the attempt an event names.
	Payments Rechecker
	// Logger gets each event's id and type, never its body; nil logs nothing.
	Logger *slog.Logger
	// Limiter rations requests per client address (ratelimit.ClientAddress),
	// before anything is read; nil: no limit.
	Limiter *ratelimit.Limiter
	// Metrics counts refusals by reason; nil counts nowhere.
	Metrics *metrics.Metrics
	// RefusalLogInterval is how often at most a refusal of one reason is
	// logged (WebhookRefusalLogIntervalDefault when zero).
	RefusalLogInterval time.Duration
}

// WebhookHandler is the endpoint Stripe sends its events to (POST). It
// answers 200 for every verified event, those it ignores included (an
// unknown type, a PaymentIntent or refund that is no attempt's, an attempt
// chargeonce does not know), so that Stripe does not send them again; 503
// when the attempt could not be read now, so that Stripe sends the event
// again later. Before any event is read, it refuses a client address past
// its allowance (429, Retry-After), a body larger than WebhookMaxBodyBytes
// (413) and a bad signature or body (400): each refusal is counted by
// reason, and logged sampled (refusalLog).
func WebhookHandler(cfg WebhookConfig) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("provider", "stripe")
	m := cfg.Metrics
	if m == nil {
		m = metrics.Discard()
	}
	return &webhookHandler{secret: cfg.Secret, payments: cfg.Payments, log: log, limiter: cfg.Limiter,
		refusals: newRefusalLog(log, m, cmp.Or(cfg.RefusalLogInterval, WebhookRefusalLogIntervalDefault))}
}

type webhookHandler struct {
	secret   string
	payments Rechecker
	log      *slog.Logger
	limiter  *ratelimit.Limiter
	refusals *refusalLog
}

func (h *webhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if ok, wait := h.limiter.Allow(ratelimit.ClientAddress(r)); !ok {
		h.refusals.refuse(ctx, r, RefusedRateLimited)
		w.Header().Set("Retry-After", strconv.Itoa(int(max((wait+time.Second-1)/time.Second, 1))))
		http.Error(w, "too many requests from this address", http.StatusTooManyRequests)
		return
	}
	if h.secret == "" {
		http.Error(w, "Stripe webhooks are not configured: set STRIPE_WEBHOOK_SECRET", http.StatusServiceUnavailable)
		return
	}
	if r.ContentLength > WebhookMaxBodyBytes {
		// Refused on its word, unread.
		h.refusals.refuse(ctx, r, RefusedTooLarge)
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, WebhookMaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.refusals.refuse(ctx, r, RefusedTooLarge)
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		h.refusals.refuse(ctx, r, RefusedUnreadable)
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	event, err := stripewebhook.ConstructEventWithOptions(body, r.Header.Get("Stripe-Signature"), h.secret,
		stripewebhook.ConstructEventOptions{
			Tolerance: WebhookTolerance,
			// Only the object's id and metadata are read, which every
			// API version renders alike: an endpoint on the account's own
			// version (the Stripe CLI's, say) is as good as stripe-go's.
			IgnoreAPIVersionMismatch: true,
		})
	if err != nil {
		h.refusals.refuse(ctx, r, signatureProblem(err))
		http.Error(w, "bad signature or body", http.StatusBadRequest)
		return
	}
	log := h.log.With("stripe_event_id", event.ID, "stripe_event_type", event.Type)
	kind := webhookEvents[event.Type]
	if kind == "" {
		log.DebugContext(ctx, "Stripe event ignored: not one that ends a wait")
		w.WriteHeader(http.StatusOK)
		return
	}
	var object struct {
		ID       string            `json:"id"`
		Metadata map[string]string `json:"metadata"`
	}
	if event.Data == nil || json.Unmarshal(event.Data.Raw, &object) != nil {
		log.WarnContext(ctx, "Stripe event ignored: its object is not a "+kind)
		w.WriteHeader(http.StatusOK)
		return
	}
	log = log.With(kind, object.ID)
	attemptID, err := uuid.Parse(object.Metadata[MetadataAttemptID])
	if err != nil {
		log.InfoContext(ctx, "Stripe event ignored: the "+kind+" is no chargeonce attempt's")
		w.WriteHeader(http.StatusOK)
		return
	}
	log = log.With("attempt_id", attemptID)
	status, err := h.payments.Recheck(ctx, attemptID)
	if err != nil {
		log.WarnContext(ctx, "could not read the attempt of a Stripe event; Stripe will send it again", "err", err)
		http.Error(w, "try again later", http.StatusServiceUnavailable)
		return
	}
	if status == "" {
		log.InfoContext(ctx, "Stripe event for an attempt chargeonce does not know")
	} else {
		log.InfoContext(ctx, "Stripe event: read the attempt at Stripe", "status", status)
	}
	w.WriteHeader(http.StatusOK)
}

// WebhookRefusal is why the endpoint refused a request before reading any
// event, as its log line and the chargeonce_stripe_webhook_refused_total
// metric name it.
type WebhookRefusal string

const (
	RefusedRateLimited         WebhookRefusal = "rate_limited"
	RefusedTooLarge            WebhookRefusal = "too_large"
	RefusedUnreadable          WebhookRefusal = "unreadable"
	RefusedNoSignature         WebhookRefusal = "no_signature"
	RefusedSignatureHeader     WebhookRefusal = "unreadable_signature"
	RefusedSignatureTooOld     WebhookRefusal = "signature_too_old"
	RefusedSignatureMismatch   WebhookRefusal = "signature_mismatch"
	RefusedSignedButNotAnEvent WebhookRefusal = "not_an_event"
)

// webhookRefusals say what each refusal means to an operator.
var webhookRefusals = map[WebhookRefusal]string{
	RefusedRateLimited:         "too many requests from this address (RATE_LIMIT_STRIPE_WEBHOOK_IP)",
	RefusedTooLarge:            "body larger than " + strconv.Itoa(WebhookMaxBodyBytes) + " bytes",
	RefusedUnreadable:          "body unreadable or cut short",
	RefusedNoSignature:         "no Stripe-Signature header",
	RefusedSignatureHeader:     "unreadable Stripe-Signature header",
	RefusedSignatureTooOld:     "signature older than " + WebhookTolerance.String(),
	RefusedSignatureMismatch:   "no signature matches STRIPE_WEBHOOK_SECRET",
	RefusedSignedButNotAnEvent: "signed, but not a readable event",
}

// signatureProblem says why an event was refused, without quoting it.
func signatureProblem(err error) WebhookRefusal {
	switch {
	case errors.Is(err, stripewebhook.ErrNotSigned):
		return RefusedNoSignature
	case errors.Is(err, stripewebhook.ErrInvalidHeader):
		return RefusedSignatureHeader
	case errors.Is(err, stripewebhook.ErrTooOld):
		return RefusedSignatureTooOld
	case errors.Is(err, stripewebhook.ErrNoValidSignature):
		return RefusedSignatureMismatch
	}
	return RefusedSignedButNotAnEvent
}

// refusalLog counts every refusal, and logs them sampled: the first of a
// reason at once, then at most one an interval, with how many of that
// reason it left out since the last line (suppressed). A stranger's flood
// costs the log one line per reason and interval.
type refusalLog struct {
	log     *slog.Logger
	metrics *metrics.Metrics
	reasons map[WebhookRefusal]*sampledRefusal // every reason, made up front: read without a lock
}

type sampledRefusal struct {
	sometimes rate.Sometimes
	unlogged  atomic.Int64
}

func newRefusalLog(log *slog.Logger, m *metrics.Metrics, every time.Duration) *refusalLog {
	l := &refusalLog{log: log, metrics: m, reasons: map[WebhookRefusal]*sampledRefusal{}}
	for reason := range webhookRefusals {
		l.reasons[reason] = &sampledRefusal{sometimes: rate.Sometimes{Interval: every}}
	}
	return l
}

// refuse counts a refusal of r for reason, and logs it if its reason's
// interval has passed.
func (l *refusalLog) refuse(ctx context.Context, r *http.Request, reason WebhookRefusal) {
	l.metrics.StripeWebhookRefused.WithLabelValues(string(reason)).Inc()
	s := l.reasons[reason]
	logged := false
	s.sometimes.Do(func() {
		logged = true
		l.log.WarnContext(ctx, "refused a Stripe webhook request", "reason", string(reason), "detail", webhookRefusals[reason],
			"remote", ratelimit.ClientAddress(r), "suppressed", s.unlogged.Swap(0))
	})
	if !logged {
		s.unlogged.Add(1)
	}
}
