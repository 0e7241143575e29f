package payment

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
)

// Captures. A charge made with CaptureManual only authorizes: the provider
// holds the money, and each capture takes part or all of it, under its own
// idempotency key, as an attempt of its own kind with every guarantee of
// the engine (claim before the provider, replay, lease and fence, our own
// provider key, the reconciler). What a capture adds is its claim: the
// capturable amount is reserved in the claim's transaction, on the locked
// charge, with a CHECK behind it (store.claimCapture), so that no
// concurrency captures more than was authorized, none follows a final
// capture, and none passes a void claimed first; a capture that fails
// gives its reservation back. Its provider key is derived from the
// attempt, stored before the first send, and never replaced: a lost
// answer is read back (FindCapture) or sent again under the same key.
//
//	claim (lock the charge, insert the key, reserve) ─► CaptureCharge
//	   ├─ succeeded ─► SUCCEEDED: the capture recorded, charge.captured
//	   ├─ failed ────► FAILED: the reservation back
//	   └─ unknown ───► PROCESSING, stuck: settled like any attempt (settle.go)

// KindCapture is the kind of a capture attempt.
const KindCapture Kind = "capture"

func init() { register(KindCapture, func(s *Service) operation { return captureOperation{s} }) }

// CaptureInput is what a merchant asks to capture: Amount of the
// authorization of the charge ChargeID (all that remains capturable when 0);
// Final releases the rest with this capture, otherwise more may follow.
type CaptureInput struct {
	ChargeID uuid.UUID
	Amount   int64
	Final    bool
}

// Capture is money a capture took of an authorization.
type Capture struct {
	ID                uuid.UUID
	ChargeID          uuid.UUID
	Amount            int64
	Currency          string
	Final             bool
	ProviderCaptureID string
	CreatedAt         time.Time
}

// CaptureTerms are a capture attempt's: Amount (resolved at the claim) of
// the authorization of the charge Of (the provider's OfProvider), in
// Currency, Final or not; and the capture it made once SUCCEEDED.
type CaptureTerms struct {
	Of         uuid.UUID
	OfProvider string
	Amount     int64
	Currency   string
	Final      bool
	Capture    *Capture
}

// Kind implements Terms.
func (CaptureTerms) Kind() Kind { return KindCapture }

// capture is a's terms as a capture attempt's.
func (a Attempt) capture() CaptureTerms {
	t, _ := a.Terms.(CaptureTerms)
	return t
}

// CaptureCharge captures in.Amount of the authorization of the merchant's
// charge in.ChargeID, once per key, as RefundCharge refunds: the first
// request with a key claims it and calls the provider; every later one
// gets the stored result. Refused before anything is claimed or sent: an
// unknown charge (ECHARGENOTFOUND), one that is not an authorization, is
// captured in full or had its final capture (ENOTCAPTURABLE), a voided one
// (EVOIDED), an expired one (EAUTHEXPIRED), more than remains capturable
// (ECAPTUREEXCEEDS).
func (s *Service) CaptureCharge(ctx context.Context, m Merchant, key string, in CaptureInput) (Result, error) {
	if err := validateCallerKey(key); err != nil {
		return Result{}, err
	}
	if in.ChargeID == uuid.Nil {
		return Result{}, Invalid("input.chargeId", "chargeId is empty: pass the id of the charge to capture")
	}
	if in.Amount < 0 || in.Amount > MaxAmount {
		return Result{}, Invalid("input.amount", "amount must be a positive integer in the currency's minor units, at most %d; leave it out to capture all that is capturable", MaxAmount)
	}
	fingerprint := captureFingerprint(in)
	a := newAttempt(m, key, CaptureTerms{Of: in.ChargeID, Amount: in.Amount, Final: in.Final}, fingerprint,
		s.cfg.Now(), s.cfg.Lease, s.cfg.Retention)
	return s.claimOnCharge(ctx, m, a, func(ctx context.Context) (claim, error) { return s.store.claimCapture(ctx, a, s.cfg.Now()) })
}

// claimOnCharge claims a, an attempt on a charge (a capture, a void), with
// claim, and performs it, or answers the key's stored attempt; a refusal
// is counted by its code.
func (s *Service) claimOnCharge(ctx context.Context, m Merchant, a Attempt, claim func(context.Context) (claim, error)) (_ Result, err error) {
	defer func() { s.noteRefusal(ctx, m, a.Kind, a.IdempotencyKey, err) }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	stored, err := s.store.get(ctx, m.ID, uuid.Nil, a.IdempotencyKey)
	if err == nil {
		return s.answerRetry(ctx, m, stored, a.Fingerprint, a.terms)
	}
	if !errors.Is(err, errNotFound) {
		return Result{}, err
	}
	c, err := traceClaim(ctx, a, claim)
	var refused *Error
	switch {
	case err == nil:
	case ErrorCode(err) == EUNAVAILABLE && db.MayHaveRun(err):
		s.release(ctx, s.attemptLog(m, a), a, lostClaimReleaseBudget, "the answer to its claim was lost")
		return Result{}, err
	case errors.As(err, &refused) && refused.Code != EUNAVAILABLE && refused.Code != EINTERNAL:
		s.metrics.CapturesRefused.WithLabelValues(refused.Code).Inc()
		return Result{}, err
	default:
		return Result{}, err
	}
	if c.outcome == foundStored {
		return s.answerRetry(ctx, m, c.attempt, a.Fingerprint, a.terms)
	}
	s.cfg.Fault(FaultAfterClaim)
	return s.perform(context.WithoutCancel(ctx), m, c.attempt), nil
}

// CaptureStatus returns the state of the capture made with key and the
// charge it captures, or nil when this merchant never used the key for a
// capture.
func (s *Service) CaptureStatus(ctx context.Context, m Merchant, key string) (*Result, uuid.UUID, error) {
	a, r, err := s.statusOf(ctx, m, key, KindCapture)
	return r, a.capture().Of, err
}

// captureFingerprint identifies a capture request, as Fingerprint does a
// charge's; it never equals another kind's.
func captureFingerprint(in CaptureInput) []byte {
	return kindFingerprint(struct {
		Kind     Kind   `json:"kind"`
		ChargeID string `json:"chargeId"`
		Amount   int64  `json:"amount,omitempty"`
		Final    bool   `json:"final"`
	}{KindCapture, in.ChargeID.String(), in.Amount, in.Final})
}

// kindFingerprint is the SHA-256 of v's JSON, a struct of strings, ints
// and bools that names its kind.
func kindFingerprint(v any) []byte {
	canonical, err := json.Marshal(v)
	if err != nil {
		panic(err) // a struct of strings, integers and bools always marshals
	}
	return fingerprintOf(canonical)
}

// captureRequest is the provider's capture request for capture attempt
// a, the same on every send.
func (s *Service) captureRequest(ctx context.Context, m Merchant, a Attempt) (ProviderCaptureRequest, error) {
	t := a.capture()
	if t.OfProvider == "" {
		var err error
		if t.OfProvider, err = s.store.providerChargeID(ctx, t.Of); err != nil {
			return ProviderCaptureRequest{}, err
		}
	}
	return ProviderCaptureRequest{
		IdempotencyKey:   a.ProviderKey,
		AttemptID:        a.ID,
		AttemptCreatedAt: a.CreatedAt,
		ProviderChargeID: t.OfProvider,
		Amount:           t.Amount,
		Currency:         t.Currency,
		Final:            t.Final,
		Metadata: map[string]string{
			"chargeonce_attempt_id":  a.ID.String(),
			"chargeonce_kind":        string(KindCapture),
			"chargeonce_charge_id":   t.Of.String(),
			"client_idempotency_key": a.IdempotencyKey,
			"merchant":               m.Name,
		},
	}, nil
}

// captureOperation is the capture kind's operation.
type captureOperation struct{ s *Service }

// captureOutcome is the provider's capture c as an outcome.
func captureOutcome(c ProviderCapture) outcome {
	if c.Succeeded {
		return outcome{ProviderID: c.ID, State: outcomeSucceeded}
	}
	return outcome{ProviderID: c.ID, State: outcomeFailed, Failure: Failure{Code: c.FailureCode, Message: c.FailureMessage}}
}

func (op captureOperation) send(ctx context.Context, m Merchant, a Attempt) (outcome, error) {
	req, err := op.s.captureRequest(ctx, m, a)
	if err != nil {
		return outcome{}, err
	}
	c, err := op.s.provider.CaptureCharge(ctx, req)
	return captureOutcome(c), err
}

func (op captureOperation) read(ctx context.Context, m Merchant, a Attempt) (*outcome, error) {
	req, err := op.s.captureRequest(ctx, m, a)
	if err != nil {
		return nil, err
	}
	c, err := op.s.provider.FindCapture(ctx, req)
	if err != nil || c == nil {
		return nil, err
	}
	o := captureOutcome(*c)
	return &o, nil
}

func (op captureOperation) record(ctx context.Context, a Attempt, o outcome, now, expiresAt time.Time) (Attempt, error) {
	if o.succeeded() {
		return op.s.store.succeedCapture(ctx, a, o.ProviderID, now, expiresAt)
	}
	return op.s.store.failCapture(ctx, a, o.Failure, now, expiresAt)
}

// unseen: a capture is not given up on while a send may still land at the
// provider: failing it would give its reservation back, and another
// capture of that amount could then capture it twice. It is only read
// until the late-charge watch's length has passed too.
func (op captureOperation) unseen(_ Attempt, age time.Duration) (bool, string) {
	return age >= op.s.cfg.RedriveWindow+op.s.cfg.LateChargeWatch,
		"The card provider could not be reached; nothing was captured."
}

func (captureOperation) providerID(a Attempt) string {
	if c := a.capture().Capture; c != nil {
		return c.ProviderCaptureID
	}
	return ""
}

func (captureOperation) answer(a Attempt, r *Result) { r.Capture = a.capture().Capture }

// settled: a finished capture never changes.
func (captureOperation) settled(Attempt) bool { return true }

func (captureOperation) recheck(_ context.Context, _ Merchant, a Attempt) (Status, error) {
	return a.Status, nil
}

func (op captureOperation) observe(_ Attempt, o outcome, by holder, _ time.Time) {
	op.s.metrics.Captures.WithLabelValues(outcomeLabel(o), by.label()).Inc()
}

// captureEventOf is the charge.captured of capture attempt a, which
// SUCCEEDED, occurring at now.
func captureEventOf(a Attempt, now time.Time) Event {
	t := a.capture()
	e := attemptEventOf(a, t.Amount, t.Currency, "", now)
	e.Type = EventChargeCaptured
	c := t.Capture
	e.Capture = &EventCapture{ID: c.ID, ChargeID: t.Of, Amount: c.Amount, Final: c.Final, CreatedAt: c.CreatedAt.UTC()}
	return e
}
