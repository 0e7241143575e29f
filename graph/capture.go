package graph

import (
	"context"
	"time"

	"chargeonce/graph/model"
	"chargeonce/payment"
)

// captureCharge captures input under key, with a secret key only.
func (r *Resolver) captureCharge(ctx context.Context, key string, input model.CaptureInput) (*model.CapturePayload, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireSecret(st, "captureCharge"); err != nil {
		return nil, err
	}
	in := payment.CaptureInput{Final: input.Final == nil || *input.Final}
	if in.ChargeID, err = chargeID(input.ChargeID, "input.chargeId"); err != nil {
		return nil, err
	}
	if input.Amount != nil {
		if *input.Amount < payment.MinAmount {
			return nil, payment.Invalid("input.amount", "amount must be at least %d minor unit; leave it out to capture all that is capturable", payment.MinAmount)
		}
		in.Amount = int64(*input.Amount)
	}
	res, err := r.Payments.CaptureCharge(ctx, m, key, in)
	if err != nil {
		return nil, err
	}
	return r.capturePayload(ctx, m, res, in.ChargeID.String()), nil
}

// voidCharge voids input under key, with a secret key only.
func (r *Resolver) voidCharge(ctx context.Context, key string, input model.VoidInput) (*model.VoidPayload, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireSecret(st, "voidCharge"); err != nil {
		return nil, err
	}
	var in payment.VoidInput
	if in.ChargeID, err = chargeID(input.ChargeID, "input.chargeId"); err != nil {
		return nil, err
	}
	res, err := r.Payments.VoidCharge(ctx, m, key, in)
	if err != nil {
		return nil, err
	}
	return r.voidPayload(ctx, m, res, in.ChargeID.String()), nil
}

// captureStatus is the state of the capture made with key, with a secret
// key only; nil for a key never used for a capture.
func (r *Resolver) captureStatus(ctx context.Context, key string) (*model.CapturePayload, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireSecret(st, "captureStatus"); err != nil {
		return nil, err
	}
	res, charge, err := r.Payments.CaptureStatus(ctx, m, key)
	if err != nil || res == nil {
		return nil, err
	}
	return r.capturePayload(ctx, m, *res, charge.String()), nil
}

// voidStatus is the state of the void made with key, with a secret key
// only; nil for a key never used for a void.
func (r *Resolver) voidStatus(ctx context.Context, key string) (*model.VoidPayload, error) {
	m, st, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireSecret(st, "voidStatus"); err != nil {
		return nil, err
	}
	res, charge, err := r.Payments.VoidStatus(ctx, m, key)
	if err != nil || res == nil {
		return nil, err
	}
	return r.voidPayload(ctx, m, *res, charge.String()), nil
}

// capturePayload maps a capture attempt's result, with its charge as it is
// now (nil when it cannot be read: the answer stands without it).
func (r *Resolver) capturePayload(ctx context.Context, m payment.Merchant, res payment.Result, charge string) *model.CapturePayload {
	p := &model.CapturePayload{
		IdempotencyKey: res.IdempotencyKey,
		Status:         model.CaptureAttemptStatus(res.Status),
		Replayed:       res.Replayed,
		Capture:        ToCapture(res.Capture),
		Charge:         r.chargeNow(ctx, m, charge),
	}
	p.RetryAfterMs, p.ExpiresAt = Hints(res)
	if f := res.Failure; f != nil {
		p.Failure = &model.CaptureFailure{Code: f.Code, Message: f.Message}
	}
	return p
}

// voidPayload maps a void attempt's result, with its charge as it is now.
func (r *Resolver) voidPayload(ctx context.Context, m payment.Merchant, res payment.Result, charge string) *model.VoidPayload {
	p := &model.VoidPayload{
		IdempotencyKey: res.IdempotencyKey,
		Status:         model.CaptureAttemptStatus(res.Status),
		Replayed:       res.Replayed,
		Charge:         r.chargeNow(ctx, m, charge),
	}
	p.Void = ToVoid(res.Void)
	p.RetryAfterMs, p.ExpiresAt = Hints(res)
	if f := res.Failure; f != nil {
		p.Failure = &model.CaptureFailure{Code: f.Code, Message: f.Message}
	}
	return p
}

// Hints are res's poll hint (retryAfterMs), set while PROCESSING, and when
// its stored result may be forgotten (expiresAt), as every payload of an
// attempt carries them; the demo's shop backend answers them too.
func Hints(res payment.Result) (after *int, expires *time.Time) {
	if res.Status == payment.StatusProcessing {
		ms := retryAfterMs(res.RetryAfter)
		after = &ms
	}
	if !res.ExpiresAt.IsZero() {
		t := res.ExpiresAt.UTC()
		expires = &t
	}
	return after, expires
}

// chargeNow is m's charge id as it is now; nil when it cannot be read.
func (r *Resolver) chargeNow(ctx context.Context, m payment.Merchant, id string) *model.Charge {
	cid, err := chargeID(id, "chargeId")
	if err != nil {
		return nil
	}
	c, err := r.Payments.Charge(ctx, m, cid)
	if err != nil {
		return nil
	}
	return toCharge(&c)
}

// ToCapture maps a capture; nil for none.
func ToCapture(c *payment.Capture) *model.Capture {
	if c == nil {
		return nil
	}
	return &model.Capture{ID: c.ID.String(), ChargeID: c.ChargeID.String(), Amount: int(c.Amount), Final: c.Final,
		CreatedAt: c.CreatedAt.UTC()}
}

// ToVoid maps a void; nil for none.
func ToVoid(v *payment.Void) *model.Void {
	if v == nil {
		return nil
	}
	return &model.Void{ID: v.ID.String(), ChargeID: v.ChargeID.String(), CreatedAt: v.CreatedAt.UTC()}
}

// chargeCaptures is where the caller's charge stands in its captures.
func (r *Resolver) chargeCaptures(ctx context.Context, charge *model.Charge) (payment.CaptureState, error) {
	m, _, err := r.caller(ctx)
	if err != nil {
		return payment.CaptureState{}, err
	}
	id, err := chargeID(charge.ID, "id")
	if err != nil {
		return payment.CaptureState{}, err
	}
	return r.Payments.CaptureState(ctx, m, id)
}

// captureMethod is the domain's capture method of m (nil: automatic).
func captureMethod(m *model.CaptureMethod) payment.CaptureMethod {
	if m != nil && *m == model.CaptureMethodManual {
		return payment.CaptureManual
	}
	return payment.CaptureAutomatic
}
