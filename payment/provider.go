package payment

import (
	"context"
	"errors"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"time"

	"github.com/google/uuid"

	"chargeonce/metrics"
	"chargeonce/tracing"
)

// ErrOutcomeUnknown means the provider may or may not have charged: the
// request timed out, the connection dropped, or the provider answered 5xx.
// Such an attempt stays PROCESSING; it is never marked FAILED on a guess.
var ErrOutcomeUnknown = errors.New("provider outcome unknown")

// ErrProviderKeySpent means that no send under the request's provider key
// can ever charge: the provider saved a failure for the key and replays it
// on every send (Stripe does so with a 500), and it certainly holds no charge
// for the attempt under any key. Only then may the attempt be sent again
// under a new provider key, which settle records on the attempt first.
var ErrProviderKeySpent = errors.New("provider key spent: the provider replays a failure for it and holds no charge for the attempt")

// ProviderChargeRequest asks the provider to charge a card once per
// IdempotencyKey (our provider key, not the client's key).
type ProviderChargeRequest struct {
	IdempotencyKey string
	// AttemptID and AttemptCreatedAt name the attempt whatever its provider
	// key, for a provider that finds charges by the attempt (the id is also
	// in Metadata as chargeonce_attempt_id); no charge for the attempt is
	// older than AttemptCreatedAt.
	AttemptID        uuid.UUID
	AttemptCreatedAt time.Time
	Amount           int64
	Currency         string
	PaymentMethod    string
	Description      string
	Metadata         map[string]string
	// ReturnURL is where the provider sends the shopper back after
	// authenticating (3-D Secure), with the attempt's idempotency key in
	// its query (ReturnKeyParam). Empty: the charge cannot authenticate,
	// and a card that needs it fails with FailureAuthenticationRequired.
	ReturnURL string
	// CaptureMethod is CaptureManual for a charge that only authorizes;
	// empty or CaptureAutomatic takes the money at once.
	CaptureMethod CaptureMethod
}

// ReturnKeyParam is the query parameter of a ReturnURL that names the
// attempt's idempotency key (the client's), so that a page that lost its
// storage on the way to the bank and back can still resume the attempt.
const ReturnKeyParam = "chargeonce_key"

// The failure codes of authentication, which the adapters map their
// provider's answers to.
const (
	// FailureAuthenticationRequired: the card needs authentication and the
	// charge has no ReturnURL to send the shopper back to.
	FailureAuthenticationRequired = "authentication_required"
	// FailureAuthenticationFailed: the shopper failed (or refused) it.
	FailureAuthenticationFailed = "authentication_failed"
	// FailureAuthenticationAbandoned: nobody authenticated within the
	// window, and the provider confirmed that the payment is cancelled.
	FailureAuthenticationAbandoned = "authentication_abandoned"
)

// ProviderCharge is the provider's answer: definitive (succeeded, or
// failed with a code), or, with Action set, waiting for the shopper.
type ProviderCharge struct {
	ID             string
	Succeeded      bool
	FailureCode    string // set when failed
	FailureMessage string
	// Action is set while the payment waits for the shopper to authenticate:
	// not final, neither succeeded nor failed. Only a charge with a
	// ReturnURL ever waits.
	Action *ProviderAction
	// Authorization is set on a succeeded charge made with CaptureManual:
	// the provider holds the money for its captures.
	Authorization *ProviderAuthorization
}

// ProviderAction is what the shopper must do before the payment can
// complete: follow URL (the provider's challenge page), which sends them
// back to the charge's ReturnURL.
type ProviderAction struct {
	URL string
}

// waiting reports whether pc waits for the shopper.
func (pc ProviderCharge) waiting() bool { return pc.Action != nil }

// Provider is a card provider that deduplicates on the idempotency key.
type Provider interface {
	// CreateCharge charges the card, or returns the charge already made under
	// the same idempotency key. A decline is a ProviderCharge with Succeeded
	// false, not an error; an error wrapping ErrOutcomeUnknown means nobody
	// knows yet.
	CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error)
	// FindCharges reads every charge the provider holds for req's attempt,
	// by its attempt (or, for a request that names none, by its
	// idempotency key), whatever provider key each was sent under: oldest
	// first, each as it is now; none when the provider holds none. One
	// attempt should hold one charge; which of several is the attempt's is
	// not the provider's to say (settleOn). A charge whose outcome nobody
	// knows yet makes it an error wrapping ErrOutcomeUnknown. It is given
	// the whole request so that a provider may search by the attempt.
	FindCharges(ctx context.Context, req ProviderChargeRequest) ([]ProviderCharge, error)
	// CancelCharge cancels the payment id of req's attempt, which waits for
	// the shopper (abandoned: nobody authenticated in time), and returns
	// the payment as it then is: a confirmed cancel is a failure with code
	// FailureAuthenticationAbandoned; a cancel refused because the payment
	// completed meanwhile is that payment, succeeded or failed. An error
	// means nobody knows yet; a provider whose charges never wait may
	// always answer with one.
	CancelCharge(ctx context.Context, req ProviderChargeRequest, id string) (ProviderCharge, error)
	// CreateRefund refunds req.Amount of the charge req.ProviderChargeID, or
	// returns the refund already made under the same idempotency key. A
	// refund the provider refuses is a ProviderRefund in RefundFailed, not
	// an error; an error wrapping ErrOutcomeUnknown means nobody knows yet.
	CreateRefund(ctx context.Context, req ProviderRefundRequest) (ProviderRefund, error)
	// FindRefund reads the refund that req made, by its idempotency key or
	// among the charge's refunds by the attempt id in its metadata; nil when
	// the provider has none. It never sends: a refund's outcome is read,
	// so that nothing is refunded again once the provider may have
	// forgotten the key.
	FindRefund(ctx context.Context, req ProviderRefundRequest) (*ProviderRefund, error)
	// CaptureCharge captures req.Amount of the authorization
	// req.ProviderChargeID, or returns the capture already made under the
	// same idempotency key. A capture the provider refuses (expired,
	// voided, more than is capturable, declined) is a ProviderCapture that
	// did not succeed, not an error; an error wrapping ErrOutcomeUnknown
	// means nobody knows yet.
	CaptureCharge(ctx context.Context, req ProviderCaptureRequest) (ProviderCapture, error)
	// FindCapture reads the capture that req made, by its idempotency key
	// or by the attempt id in its metadata; nil when the provider has none.
	// It never sends.
	FindCapture(ctx context.Context, req ProviderCaptureRequest) (*ProviderCapture, error)
	// VoidCharge voids the authorization req.ProviderChargeID, or returns
	// the void already made under the same idempotency key; refused (a
	// capture was made, it expired) is a ProviderVoid that did not succeed.
	VoidCharge(ctx context.Context, req ProviderVoidRequest) (ProviderVoid, error)
	// FindVoid reads the void that req made; nil when the provider has
	// none. It never sends.
	FindVoid(ctx context.Context, req ProviderVoidRequest) (*ProviderVoid, error)
	// ReadAuthorization reads where the authorization providerChargeID
	// stands now: open, captured, voided or expired, with its amounts.
	ReadAuthorization(ctx context.Context, providerChargeID string) (ProviderAuthorization, error)
}

// ProviderRefundRequest asks the provider to refund part or all of a
// charge once per IdempotencyKey (our provider key of the refund attempt).
type ProviderRefundRequest struct {
	IdempotencyKey string
	// AttemptID names the refund attempt whatever its provider key (it is
	// also in Metadata as chargeonce_attempt_id); AttemptCreatedAt: no
	// refund for it is older.
	AttemptID        uuid.UUID
	AttemptCreatedAt time.Time
	// ProviderChargeID is the charge refunded, as the provider names it.
	ProviderChargeID string
	Amount           int64
	Currency         string
	Reason           string
	Metadata         map[string]string
}

// RefundState is where a refund stands at the provider.
type RefundState string

const (
	// RefundPending: accepted, not final yet; read it again later.
	RefundPending RefundState = "pending"
	// RefundSucceeded: the money went back. A succeeded refund may still
	// fail later (the card was closed), which a later read says.
	RefundSucceeded RefundState = "succeeded"
	// RefundFailed: the refund did not happen, or was reversed.
	RefundFailed RefundState = "failed"
)

// ProviderRefund is the provider's word on a refund.
type ProviderRefund struct {
	ID             string
	State          RefundState
	FailureCode    string // set when failed
	FailureMessage string
}

// instrumented is a Provider that times and counts every call, through
// one wrapper (call): each method names its operation and says how its
// answer reads in the metrics.
type instrumented struct {
	p Provider
	m *metrics.Metrics
}

func instrument(p Provider, m *metrics.Metrics) Provider { return instrumented{p: p, m: m} }

// call runs fn, the provider call of operation under the provider key
// key, in a span of its own (payment.provider), and observes how long it
// took and how it ended: an error by its kind, otherwise as result says.
// The span names the operation and the provider key, never what was sent.
func call[T any](ctx context.Context, p instrumented, operation, key string, fn func(context.Context) (T, error), result func(T) string) (T, error) {
	ctx, span := tracer.Start(ctx, "payment.provider", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("chargeonce.provider_operation", operation), tracing.KeyProviderKey.String(key))
	}
	defer span.End()
	start := time.Now()
	v, err := fn(ctx)
	r := "ok"
	switch {
	case err != nil && errors.Is(err, ErrOutcomeUnknown):
		r = "unknown"
	case err != nil && errors.Is(err, ErrProviderKeySpent):
		r = "key_spent"
	case err != nil:
		r = "error"
	default:
		r = result(v)
	}
	span.SetAttributes(attribute.String("chargeonce.provider_result", r))
	if err != nil {
		span.SetStatus(codes.Error, r)
	}
	metrics.ObserveWithTrace(ctx, p.m.ProviderDuration.WithLabelValues(operation, r), time.Since(start).Seconds())
	if r == "unknown" || r == "error" || r == "key_spent" {
		p.m.ProviderErrors.WithLabelValues(operation).Inc()
	}
	return v, err
}

// found reads a lookup's answer: not_found for none.
func found[T any](v *T) string {
	if v == nil {
		return "not_found"
	}
	return "ok"
}

// charged reads a charge's answer.
func charged(pc ProviderCharge) string {
	switch {
	case pc.waiting():
		return "requires_action"
	case !pc.Succeeded:
		return "declined"
	}
	return "ok"
}

// refused reads the answer of a capture or a void: declined when refused.
func refused(succeeded bool) string {
	if succeeded {
		return "ok"
	}
	return "declined"
}

func (p instrumented) CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error) {
	return call(ctx, p, "create_charge", req.IdempotencyKey, func(ctx context.Context) (ProviderCharge, error) { return p.p.CreateCharge(ctx, req) }, charged)
}

func (p instrumented) CancelCharge(ctx context.Context, req ProviderChargeRequest, id string) (ProviderCharge, error) {
	return call(ctx, p, "cancel_charge", req.IdempotencyKey, func(ctx context.Context) (ProviderCharge, error) { return p.p.CancelCharge(ctx, req, id) },
		func(pc ProviderCharge) string {
			if pc.Succeeded {
				return "succeeded"
			}
			return "ok"
		})
}

func (p instrumented) FindCharges(ctx context.Context, req ProviderChargeRequest) ([]ProviderCharge, error) {
	return call(ctx, p, "find_charge", req.IdempotencyKey, func(ctx context.Context) ([]ProviderCharge, error) { return p.p.FindCharges(ctx, req) },
		func(charges []ProviderCharge) string {
			if len(charges) == 0 {
				return "not_found"
			}
			return "ok"
		})
}

func (p instrumented) CreateRefund(ctx context.Context, req ProviderRefundRequest) (ProviderRefund, error) {
	return call(ctx, p, "create_refund", req.IdempotencyKey, func(ctx context.Context) (ProviderRefund, error) { return p.p.CreateRefund(ctx, req) },
		func(r ProviderRefund) string {
			switch r.State {
			case RefundPending:
				return "pending"
			case RefundFailed:
				return "declined"
			}
			return "ok"
		})
}

func (p instrumented) FindRefund(ctx context.Context, req ProviderRefundRequest) (*ProviderRefund, error) {
	return call(ctx, p, "find_refund", req.IdempotencyKey, func(ctx context.Context) (*ProviderRefund, error) { return p.p.FindRefund(ctx, req) }, found)
}

func (p instrumented) CaptureCharge(ctx context.Context, req ProviderCaptureRequest) (ProviderCapture, error) {
	return call(ctx, p, "capture_charge", req.IdempotencyKey, func(ctx context.Context) (ProviderCapture, error) { return p.p.CaptureCharge(ctx, req) },
		func(c ProviderCapture) string { return refused(c.Succeeded) })
}

func (p instrumented) FindCapture(ctx context.Context, req ProviderCaptureRequest) (*ProviderCapture, error) {
	return call(ctx, p, "find_capture", req.IdempotencyKey, func(ctx context.Context) (*ProviderCapture, error) { return p.p.FindCapture(ctx, req) }, found)
}

func (p instrumented) VoidCharge(ctx context.Context, req ProviderVoidRequest) (ProviderVoid, error) {
	return call(ctx, p, "void_charge", req.IdempotencyKey, func(ctx context.Context) (ProviderVoid, error) { return p.p.VoidCharge(ctx, req) },
		func(v ProviderVoid) string { return refused(v.Succeeded) })
}

func (p instrumented) FindVoid(ctx context.Context, req ProviderVoidRequest) (*ProviderVoid, error) {
	return call(ctx, p, "find_void", req.IdempotencyKey, func(ctx context.Context) (*ProviderVoid, error) { return p.p.FindVoid(ctx, req) }, found)
}

func (p instrumented) ReadAuthorization(ctx context.Context, providerChargeID string) (ProviderAuthorization, error) {
	return call(ctx, p, "read_authorization", "", func(ctx context.Context) (ProviderAuthorization, error) {
		return p.p.ReadAuthorization(ctx, providerChargeID)
	},
		func(a ProviderAuthorization) string { return string(a.State) })
}
