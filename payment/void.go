package payment

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Voids. A void cancels an authorization (a charge made with
// CaptureManual) that nothing was captured of: an attempt of its own kind,
// under its own idempotency key, with every guarantee of the engine. Its
// claim marks the void on the locked charge (store.claimVoid), so that a
// void and a capture of one charge race to exactly one winner, in the
// record and at the provider: whichever claimed first; the other is
// refused before it calls the provider (ECAPTURED, EVOIDED). A void that
// fails gives its claim back.

// KindVoid is the kind of a void attempt.
const KindVoid Kind = "void"

func init() { register(KindVoid, func(s *Service) operation { return voidOperation{s} }) }

// VoidInput is what a merchant asks to void: the authorization of the
// charge ChargeID.
type VoidInput struct {
	ChargeID uuid.UUID
}

// Void is an authorization cancelled: nothing was taken.
type Void struct {
	ID             uuid.UUID
	ChargeID       uuid.UUID
	ProviderVoidID string
	CreatedAt      time.Time
}

// VoidTerms are a void attempt's: the charge Of (the provider's
// OfProvider) whose authorization it voids, of Amount in Currency; and the
// void it made once SUCCEEDED.
type VoidTerms struct {
	Of         uuid.UUID
	OfProvider string
	Amount     int64
	Currency   string
	Void       *Void
}

// Kind implements Terms.
func (VoidTerms) Kind() Kind { return KindVoid }

// void is a's terms as a void attempt's.
func (a Attempt) void() VoidTerms {
	t, _ := a.Terms.(VoidTerms)
	return t
}

// VoidCharge voids the authorization of the merchant's charge in.ChargeID,
// once per key. Refused before anything is claimed or sent: an unknown
// charge (ECHARGENOTFOUND), one with a capture made or claimed, or an
// automatic one (ECAPTURED), one voided already (EVOIDED), an expired one
// (EAUTHEXPIRED).
func (s *Service) VoidCharge(ctx context.Context, m Merchant, key string, in VoidInput) (Result, error) {
	if err := validateCallerKey(key); err != nil {
		return Result{}, err
	}
	return s.void(ctx, m, key, in)
}

// void is VoidCharge for any valid key, chargeonce's own included.
func (s *Service) void(ctx context.Context, m Merchant, key string, in VoidInput) (Result, error) {
	if err := ValidateKey(key); err != nil {
		return Result{}, err
	}
	if in.ChargeID == uuid.Nil {
		return Result{}, Invalid("input.chargeId", "chargeId is empty: pass the id of the charge to void")
	}
	a := newAttempt(m, key, VoidTerms{Of: in.ChargeID}, voidFingerprint(in), s.cfg.Now(), s.cfg.Lease, s.cfg.Retention)
	return s.claimOnCharge(ctx, m, a, func(ctx context.Context) (claim, error) { return s.store.claimVoid(ctx, a, s.cfg.Now()) })
}

// VoidStatus returns the state of the void made with key and the charge it
// voids, or nil when this merchant never used the key for a void.
func (s *Service) VoidStatus(ctx context.Context, m Merchant, key string) (*Result, uuid.UUID, error) {
	a, r, err := s.statusOf(ctx, m, key, KindVoid)
	return r, a.void().Of, err
}

// voidFingerprint identifies a void request; it never equals another
// kind's.
func voidFingerprint(in VoidInput) []byte {
	return kindFingerprint(struct {
		Kind     Kind   `json:"kind"`
		ChargeID string `json:"chargeId"`
	}{KindVoid, in.ChargeID.String()})
}

// voidRequest is the provider's void request for void attempt a, the
// same on every send.
func (s *Service) voidRequest(ctx context.Context, m Merchant, a Attempt) (ProviderVoidRequest, error) {
	t := a.void()
	if t.OfProvider == "" {
		var err error
		if t.OfProvider, err = s.store.providerChargeID(ctx, t.Of); err != nil {
			return ProviderVoidRequest{}, err
		}
	}
	return ProviderVoidRequest{
		IdempotencyKey:   a.ProviderKey,
		AttemptID:        a.ID,
		AttemptCreatedAt: a.CreatedAt,
		ProviderChargeID: t.OfProvider,
		Metadata: map[string]string{
			"chargeonce_attempt_id":  a.ID.String(),
			"chargeonce_kind":        string(KindVoid),
			"chargeonce_charge_id":   t.Of.String(),
			"client_idempotency_key": a.IdempotencyKey,
			"merchant":               m.Name,
		},
	}, nil
}

// voidOperation is the void kind's operation.
type voidOperation struct{ s *Service }

// voidOutcome is the provider's void v as an outcome.
func voidOutcome(v ProviderVoid) outcome {
	if v.Succeeded {
		return outcome{ProviderID: v.ID, State: outcomeSucceeded}
	}
	return outcome{ProviderID: v.ID, State: outcomeFailed, Failure: Failure{Code: v.FailureCode, Message: v.FailureMessage}}
}

func (op voidOperation) send(ctx context.Context, m Merchant, a Attempt) (outcome, error) {
	req, err := op.s.voidRequest(ctx, m, a)
	if err != nil {
		return outcome{}, err
	}
	v, err := op.s.provider.VoidCharge(ctx, req)
	return voidOutcome(v), err
}

func (op voidOperation) read(ctx context.Context, m Merchant, a Attempt) (*outcome, error) {
	req, err := op.s.voidRequest(ctx, m, a)
	if err != nil {
		return nil, err
	}
	v, err := op.s.provider.FindVoid(ctx, req)
	if err != nil || v == nil {
		return nil, err
	}
	o := voidOutcome(*v)
	return &o, nil
}

func (op voidOperation) record(ctx context.Context, a Attempt, o outcome, now, expiresAt time.Time) (Attempt, error) {
	if o.succeeded() {
		return op.s.store.succeedVoid(ctx, a, o.ProviderID, now, expiresAt)
	}
	return op.s.store.failVoid(ctx, a, o.Failure, now, expiresAt)
}

// unseen: a void the provider never showed is given up on after the
// redrive window: failing it only lets captures be claimed again, and a
// late void would make a capture fail at the provider, never take money.
func (voidOperation) unseen(Attempt, time.Duration) (bool, string) {
	return true, "The card provider could not be reached; the authorization was not voided."
}

func (voidOperation) providerID(a Attempt) string {
	if v := a.void().Void; v != nil {
		return v.ProviderVoidID
	}
	return ""
}

func (voidOperation) answer(a Attempt, r *Result) { r.Void = a.void().Void }

// settled: a finished void never changes.
func (voidOperation) settled(Attempt) bool { return true }

func (voidOperation) recheck(_ context.Context, _ Merchant, a Attempt) (Status, error) {
	return a.Status, nil
}

func (op voidOperation) observe(_ Attempt, o outcome, by holder, _ time.Time) {
	op.s.metrics.Voids.WithLabelValues(outcomeLabel(o), by.label()).Inc()
}

// voidEventOf is the charge.voided of void attempt a, which SUCCEEDED,
// occurring at now.
func voidEventOf(a Attempt, now time.Time) Event {
	t := a.void()
	e := attemptEventOf(a, t.Amount, t.Currency, "", now)
	e.Type = EventChargeVoided
	e.Void = &EventVoid{ID: t.Void.ID, ChargeID: t.Of, CreatedAt: t.Void.CreatedAt.UTC()}
	return e
}
