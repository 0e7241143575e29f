package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/google/uuid"
	stripego "github.com/stripe/stripe-go/v85"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"

	"chargeonce/payment"
)

// Stripe's webhook events, heard at an endpoint of chargeonce's. An event
// says that a PaymentIntent or a refund changed; it never decides an
// outcome. Its signature is checked against the endpoint's signing secret,
// the attempt is taken from its object's metadata (MetadataAttemptID), and
// chargeonce reads the attempt from Stripe at once (Rechecker): so a forged
// event is refused, and a redelivered, late or reordered one can only make
// chargeonce read Stripe again.

// WebhookMaxBodyBytes bounds an event's body: Stripe's events are larger
// than chargeonce's own requests (MAX_BODY_BYTES), with the whole
// PaymentIntent in them, and far smaller than this.
const WebhookMaxBodyBytes = 256 << 10

// WebhookTolerance is how old a signature may be: an event signed longer
// ago is refused, so that a captured one cannot be replayed for long.
const WebhookTolerance = stripewebhook.DefaultTolerance

// webhookEvents are the events that may end an attempt's wait, for the
// shopper or for a pending refund, each with the kind of its object (that
// of charge.refund.updated is a refund too); the endpoint answers any other
// with 200 and reads nothing.
var webhookEvents = map[stripego.EventType]string{
	stripego.EventTypePaymentIntentSucceeded:      "payment_intent",
	stripego.EventTypePaymentIntentPaymentFailed:  "payment_intent",
	stripego.EventTypePaymentIntentCanceled:       "payment_intent",
	stripego.EventTypePaymentIntentRequiresAction: "payment_intent",
	stripego.EventTypeChargeRefundUpdated:         "refund",
	stripego.EventTypeRefundCreated:               "refund",
	stripego.EventTypeRefundUpdated:               "refund",
	stripego.EventTypeRefundFailed:                "refund",
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
}

// WebhookHandler is the endpoint Stripe sends its events to (POST). It
// answers 200 for every verified event, those it ignores included (an
// unknown type, a PaymentIntent or refund that is no attempt's, an attempt
// chargeonce does not know), so that Stripe does not send them again; 400
// for a bad signature or body, before anything is read; 503 when the
// attempt could not be read now, so that Stripe sends the event again later.
func WebhookHandler(cfg WebhookConfig) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &webhookHandler{secret: cfg.Secret, payments: cfg.Payments, log: log.With("provider", "stripe")}
}

type webhookHandler struct {
	secret   string
	payments Rechecker
	log      *slog.Logger
}

func (h *webhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if h.secret == "" {
		http.Error(w, "Stripe webhooks are not configured: set STRIPE_WEBHOOK_SECRET", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, WebhookMaxBodyBytes))
	if err != nil {
		h.log.WarnContext(ctx, "refused a Stripe webhook request: unreadable or larger than the limit", "limit_bytes", WebhookMaxBodyBytes)
		http.Error(w, "unreadable or too large body", http.StatusBadRequest)
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
		h.log.WarnContext(ctx, "refused a Stripe webhook request", "reason", signatureProblem(err))
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

// signatureProblem says why an event was refused, without quoting it.
func signatureProblem(err error) string {
	switch {
	case errors.Is(err, stripewebhook.ErrNotSigned):
		return "no Stripe-Signature header"
	case errors.Is(err, stripewebhook.ErrInvalidHeader):
		return "unreadable Stripe-Signature header"
	case errors.Is(err, stripewebhook.ErrTooOld):
		return "signature older than " + WebhookTolerance.String()
	case errors.Is(err, stripewebhook.ErrNoValidSignature):
		return "no signature matches STRIPE_WEBHOOK_SECRET"
	}
	return "signed, but not a readable event"
}
