package payment

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
)

// Refunds. A refund is an attempt of its own kind (KindRefund), under its
// own idempotency key, with every guarantee of a charge from the same
// machinery: the key is claimed before the provider is called, a retry
// gets the stored result, one holder at a time works on it under a lease
// fenced on the fence, our own provider key goes to the
// provider, and the reconciler finishes what dies in the middle. What a
// refund adds is its claim: the charge's refundable money is reserved in
// the claim's transaction (store.claimRefund), so that no concurrency
// refunds more than was charged, and a refund that fails gives its
// reservation back. A refund the provider holds pending stays PROCESSING
// and is only ever read again (pend, settle).
//
//	claim (lock the charge, insert the key, reserve the amount) ─► CreateRefund
//	   ├─ succeeded ─► SUCCEEDED: the refund recorded, refund.succeeded
//	   ├─ failed ────► FAILED: the reservation back, refund.failed
//	   ├─ pending ───► PROCESSING, read by the reconciler every RefundCheckInterval
//	   └─ unknown ───► PROCESSING, stuck: settled like a charge (settle.go)

// KindRefund is the kind of a refund attempt.
const KindRefund Kind = "refund"

func init() { register(KindRefund, func(s *Service) operation { return refundOperation{s} }) }

// RefundTerms are a refund attempt's: Amount of the charge Of (the
// provider's OfProvider) in Currency, resolved at the claim, for Reason;
// and the refund it made once SUCCEEDED.
type RefundTerms struct {
	Of         uuid.UUID
	OfProvider string
	Amount     int64
	Currency   string
	Reason     string
	Refund     *Refund
}

// Kind implements Terms.
func (RefundTerms) Kind() Kind { return KindRefund }

// refund is a's terms as a refund attempt's.
func (a Attempt) refund() RefundTerms {
	t, _ := a.Terms.(RefundTerms)
	return t
}

// RefundCharge refunds in.Amount of the merchant's charge in.ChargeID
// (what remains refundable when Amount is 0), once per key: the first
// request with a key claims it and calls the provider; every later one
// gets the stored result, PROCESSING while the refund runs, or EKEYREUSED
// for another input. More than remains refundable is EREFUNDEXCEEDS, an
// unknown charge (or another merchant's) ECHARGENOTFOUND; then nothing is
// claimed or sent. A key beginning with chargeonce_ is refused, reserved
// for chargeonce's own refunds (refundOwed).
func (s *Service) RefundCharge(ctx context.Context, m Merchant, key string, in RefundInput) (Result, error) {
	if err := validateCallerKey(key); err != nil {
		return Result{}, err
	}
	return s.refund(ctx, m, key, in)
}

// refund is RefundCharge for any valid key, chargeonce's own included.
func (s *Service) refund(ctx context.Context, m Merchant, key string, in RefundInput) (_ Result, err error) {
	defer func() { s.noteRefusal(ctx, m, KindRefund, key, err) }()
	if err := ValidateKey(key); err != nil {
		return Result{}, err
	}
	if err := in.Validate(); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	a := newRefundAttempt(m, key, in, s.cfg.Now(), s.cfg)
	// A retry is answered without locking the charge.
	stored, err := s.store.get(ctx, m.ID, uuid.Nil, key)
	if err == nil {
		return s.answerRetry(ctx, m, stored, a.Fingerprint, a.terms)
	}
	if !errors.Is(err, errNotFound) {
		return Result{}, err
	}
	c, err := traceClaim(ctx, a, func(ctx context.Context) (claim, error) { return s.store.claimRefund(ctx, a, in.Amount) })
	switch code := ErrorCode(err); {
	case err == nil:
	case code == EREFUNDEXCEEDS:
		s.metrics.RefundsRefused.WithLabelValues("exceeds_charge").Inc()
		return Result{}, err
	case code == ECHARGENOTFOUND:
		s.metrics.RefundsRefused.WithLabelValues("charge_not_found").Inc()
		return Result{}, err
	case code == EUNAVAILABLE && db.MayHaveRun(err):
		// The commit may have happened with only its reply lost: release
		// the lease, fenced on the claim's id and first number, so that the
		// client's retry takes the attempt over at once.
		s.release(ctx, s.attemptLog(m, a), a, lostClaimReleaseBudget, "the answer to its claim was lost")
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

// RefundStatus returns the state of the refund made with key, or nil when
// this merchant never used the key for a refund.
func (s *Service) RefundStatus(ctx context.Context, m Merchant, key string) (*Result, error) {
	_, r, err := s.statusOf(ctx, m, key, KindRefund)
	return r, err
}

// Refunds lists the refunds of the merchant's charge, oldest first, and
// what it has refunded.
func (s *Service) Refunds(ctx context.Context, m Merchant, chargeID uuid.UUID) (refunded int64, refunds []Refund, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	return s.store.refunds(ctx, m.ID, chargeID)
}

// newRefundAttempt is the refund attempt a request claims for key and in
// at now; its amount (when in's is 0) and currency come from the charge,
// in the claim.
func newRefundAttempt(m Merchant, key string, in RefundInput, now time.Time, cfg Config) Attempt {
	return newAttempt(m, key, RefundTerms{Of: in.ChargeID, Amount: in.Amount, Reason: in.Reason}, RefundFingerprint(in),
		now, cfg.Lease, cfg.Retention)
}

// refundRequest is the provider's refund request for refund attempt a. It
// is the same on every send, or the provider refuses the repeat of our key.
func (s *Service) refundRequest(ctx context.Context, m Merchant, a Attempt) (ProviderRefundRequest, error) {
	t := a.refund()
	providerChargeID := t.OfProvider
	if providerChargeID == "" {
		var err error
		if providerChargeID, err = s.store.providerChargeID(ctx, t.Of); err != nil {
			return ProviderRefundRequest{}, err
		}
	}
	return ProviderRefundRequest{
		IdempotencyKey:   a.ProviderKey,
		AttemptID:        a.ID,
		AttemptCreatedAt: a.CreatedAt,
		ProviderChargeID: providerChargeID,
		Amount:           t.Amount,
		Currency:         t.Currency,
		Reason:           t.Reason,
		Metadata: map[string]string{
			"chargeonce_attempt_id":  a.ID.String(),
			"chargeonce_kind":        string(KindRefund),
			"chargeonce_charge_id":   t.Of.String(),
			"client_idempotency_key": a.IdempotencyKey,
			"merchant":               m.Name,
		},
	}, nil
}

// Validate checks a refund request against the API's limits.
func (in RefundInput) Validate() error {
	if in.ChargeID == uuid.Nil {
		return Invalid("input.chargeId", "chargeId is empty: pass the id of the charge to refund")
	}
	if in.Amount < 0 || in.Amount > MaxAmount {
		return Invalid("input.amount", "amount must be a positive integer in the currency's minor units, at most %d; leave it out to refund what remains", MaxAmount)
	}
	return checkText("input.reason", in.Reason, MaxDescriptionLength)
}

// RefundFingerprint identifies a refund request, as Fingerprint does a
// charge's: the same key with another request is refused. It never equals
// a charge's, so a charge's key reused for a refund is refused too.
func RefundFingerprint(in RefundInput) []byte {
	canonical, err := json.Marshal(struct {
		Kind     Kind   `json:"kind"`
		ChargeID string `json:"chargeId"`
		Amount   int64  `json:"amount,omitempty"`
		Reason   []byte `json:"reason,omitempty"`
	}{KindRefund, in.ChargeID.String(), in.Amount, []byte(in.Reason)})
	if err != nil {
		panic(err) // a struct of strings and an integer always marshals
	}
	return fingerprintOf(canonical)
}

// recheckRefund reads the provider about refund attempt a, which it holds
// pending, for a provider's webhook: the reconciler's next read, now. It
// takes the attempt over first, as the reconciler would, so that one
// holder at a time records the outcome; an attempt someone else holds is
// left to them.
func (s *Service) recheckRefund(ctx context.Context, m Merchant, a Attempt) (Status, error) {
	now := s.cfg.Now()
	// A pending refund's lease ends at its next read, at most
	// RefundCheckInterval away: take it over as if that read were due now.
	// Should a reconciler hold it meanwhile, the takeover fences it off,
	// and the worst is one more read of the provider.
	taken, ok, err := s.store.takeOver(ctx, a, now.Add(s.cfg.RefundCheckInterval), now.Add(s.cfg.Lease))
	if err != nil || !ok {
		return a.Status, err
	}
	st, done := s.settle(ctx, s.attemptLog(m, taken), m, taken, byRequest)
	if st == leftOpen {
		return done.Status, errors.New("the provider could not be read about the refund")
	}
	return done.Status, nil
}

// ProcessingRefund is what operators see of a refund left PROCESSING: its
// holder died or the outcome is unknown (the reconciler settles it), or it
// is only read since PendingSince: the provider holds it pending, or did
// not show it within the redrive window.
type ProcessingRefund struct {
	Merchant         string
	IdempotencyKey   string
	ProviderKey      string
	ChargeID         uuid.UUID
	ProviderChargeID string
	Amount           int64
	Currency         string
	Holders          int // how many holders it had: 1, and one more per takeover
	CreatedAt        time.Time
	LockedUntil      time.Time
	PendingSince     time.Time // zero unless it is only read (see Attempt.PendingSince)
}

// ProcessingRefunds lists up to limit refunds left PROCESSING, oldest first.
func (s *Service) ProcessingRefunds(ctx context.Context, limit int) ([]ProcessingRefund, error) {
	return s.store.processingRefunds(ctx, limit)
}

// recheckSucceededRefund reads the provider about a's refund, which
// succeeded, because the provider said it changed: a refund the provider
// now says failed (the card was closed) is recorded FAILED, and its
// amount is refundable again (reverseRefund). Nothing is sent.
func (s *Service) recheckSucceededRefund(ctx context.Context, m Merchant, a Attempt) (Status, error) {
	req, err := s.refundRequest(ctx, m, a)
	if err != nil {
		return a.Status, err
	}
	r, err := s.provider.FindRefund(ctx, req)
	if err != nil || r == nil || r.State != RefundFailed {
		return a.Status, err
	}
	done, reversed, err := s.store.reverseRefund(ctx, a, Failure{Code: r.FailureCode, Message: r.FailureMessage}, s.cfg.Now())
	if err == nil && reversed {
		s.metrics.Refunds.WithLabelValues("reversed", byRequest.label()).Inc()
		s.attemptLog(m, done).WarnContext(ctx, "a refund that succeeded failed later at the provider; its amount is refundable again",
			"provider_refund_id", r.ID, "failure_code", r.FailureCode)
	}
	return a.Status, err
}

// refundOperation is the refund kind's operation.
type refundOperation struct{ s *Service }

// refundOutcome is the provider's refund r as an outcome.
func refundOutcome(r ProviderRefund) outcome {
	o := outcome{ProviderID: r.ID, State: outcomeFailed}
	switch r.State {
	case RefundSucceeded:
		o.State = outcomeSucceeded
	case RefundPending:
		o.State = outcomePending
	default:
		o.Failure = Failure{Code: r.FailureCode, Message: r.FailureMessage}
	}
	return o
}

func (op refundOperation) send(ctx context.Context, m Merchant, a Attempt) (outcome, error) {
	req, err := op.s.refundRequest(ctx, m, a)
	if err != nil {
		return outcome{}, err
	}
	r, err := op.s.provider.CreateRefund(ctx, req)
	return refundOutcome(r), err
}

func (op refundOperation) read(ctx context.Context, m Merchant, a Attempt) (*outcome, error) {
	req, err := op.s.refundRequest(ctx, m, a)
	if err != nil {
		return nil, err
	}
	r, err := op.s.provider.FindRefund(ctx, req)
	if err != nil || r == nil {
		return nil, err
	}
	o := refundOutcome(*r)
	return &o, nil
}

// record records the refund; a refund that failed gives its reservation
// back, in the transaction that fails it.
func (op refundOperation) record(ctx context.Context, a Attempt, o outcome, now, expiresAt time.Time) (Attempt, error) {
	if o.succeeded() {
		return op.s.store.succeedRefund(ctx, a, o.ProviderID, now, expiresAt)
	}
	return op.s.store.failRefund(ctx, a, o.Failure, now, expiresAt)
}

// unseen: a refund is not given up on while a send may still land at the
// provider: failing it would give its amount back, and a second refund of
// that amount could then refund it twice. It is only read until the
// late-charge watch's length has passed too.
func (op refundOperation) unseen(_ Attempt, age time.Duration) (bool, string) {
	return age >= op.s.cfg.RedriveWindow+op.s.cfg.LateChargeWatch,
		"The card provider could not be reached; nothing was refunded."
}

func (refundOperation) providerID(a Attempt) string {
	if r := a.refund().Refund; r != nil {
		return r.ProviderRefundID
	}
	return ""
}

func (refundOperation) answer(a Attempt, r *Result) { r.Refund = a.refund().Refund }

// settled: never; a refund that succeeded may still fail later, so its
// state is always read.
func (refundOperation) settled(Attempt) bool { return false }

// recheck reads a refund the provider holds pending, or one that
// succeeded and may have failed since.
func (op refundOperation) recheck(ctx context.Context, m Merchant, a Attempt) (Status, error) {
	switch r := a.refund().Refund; {
	case a.Status == StatusProcessing && !a.PendingSince.IsZero():
		return op.s.recheckRefund(ctx, m, a)
	case r != nil && r.Status == StatusSucceeded:
		return op.s.recheckSucceededRefund(ctx, m, a)
	}
	return a.Status, nil
}

func (op refundOperation) observe(_ Attempt, o outcome, by holder, _ time.Time) {
	op.s.metrics.Refunds.WithLabelValues(outcomeLabel(o), by.label()).Inc()
}
