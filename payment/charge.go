package payment

import (
	"context"
	"net/url"
	"time"
)

// The charge kind: an attempt that charges a card (ChargeCard, claim.go),
// or only authorizes it for captures later (CaptureManual).

// KindCharge is the kind of a charge attempt.
const KindCharge Kind = "charge"

func init() { register(KindCharge, func(s *Service) operation { return chargeOperation{s} }) }

// ChargeTerms are a charge attempt's: what the client asked to charge, and
// the charge it made once SUCCEEDED.
type ChargeTerms struct {
	Input  ChargeInput
	Charge *Charge
}

// Kind implements Terms.
func (ChargeTerms) Kind() Kind { return KindCharge }

// charge is a's terms as a charge attempt's.
func (a Attempt) charge() ChargeTerms {
	t, _ := a.Terms.(ChargeTerms)
	return t
}

// chargeOperation is the charge kind's operation.
type chargeOperation struct{ s *Service }

// chargeDetail is what a charge's outcome carries for the charge alone:
// the provider's other successful charges for the attempt, when a lookup
// found them (settleOn), and the authorization of a manual charge.
type chargeDetail struct {
	duplicates    []string
	authorization *ProviderAuthorization
}

// chargeOutcome is the provider's charge pc as an outcome.
func chargeOutcome(pc ProviderCharge, duplicates []string) outcome {
	o := outcome{ProviderID: pc.ID, State: outcomeFailed, Action: pc.Action,
		detail: chargeDetail{duplicates: duplicates, authorization: pc.Authorization}}
	switch {
	case pc.waiting():
		o.State = outcomeWaiting
	case pc.Succeeded:
		o.State = outcomeSucceeded
	default:
		o.Failure = Failure{Code: pc.FailureCode, Message: pc.FailureMessage}
	}
	return o
}

func (op chargeOperation) send(ctx context.Context, m Merchant, a Attempt) (outcome, error) {
	pc, err := op.s.provider.CreateCharge(ctx, providerRequest(m, a))
	return chargeOutcome(pc, nil), err
}

// read finds every charge the provider holds for a, and settles on one.
func (op chargeOperation) read(ctx context.Context, m Merchant, a Attempt) (*outcome, error) {
	charges, err := op.s.provider.FindCharges(ctx, providerRequest(m, a))
	if err != nil {
		return nil, err
	}
	pc, duplicates := settleOn(charges)
	if pc == nil {
		return nil, nil
	}
	o := chargeOutcome(*pc, duplicates)
	return &o, nil
}

// record records the charge with its duplicates, or the failure; a charge
// that failed because the provider could not be reached stays watched for
// a late charge, since a send may still be in flight.
func (op chargeOperation) record(ctx context.Context, a Attempt, o outcome, now, expiresAt time.Time) (Attempt, error) {
	detail, _ := o.detail.(chargeDetail)
	if o.succeeded() {
		var until *time.Time
		if a.charge().Input.CaptureMethod == CaptureManual {
			u := authorizedUntil(detail, now)
			until = &u
		}
		done, duplicates, err := op.s.store.succeed(ctx, a, o.ProviderID, detail, until, now, expiresAt)
		op.s.announceDuplicates(ctx, a, o.ProviderID, duplicates)
		return done, err
	}
	var watch lateWatch
	if o.Failure.Code == FailureProviderUnavailable {
		watch = lateWatch{first: now.Add(lateChargeFirstCheck), until: now.Add(op.s.cfg.LateChargeWatch)}
	}
	return op.s.store.failCharge(ctx, a, o.Failure, now, expiresAt, watch)
}

func (chargeOperation) unseen(Attempt, time.Duration) (bool, string) {
	return true, "The card provider could not be reached; the card was not charged."
}

func (chargeOperation) providerID(a Attempt) string {
	if c := a.charge().Charge; c != nil {
		return c.ProviderChargeID
	}
	return ""
}

func (chargeOperation) answer(a Attempt, r *Result) { r.Charge = a.charge().Charge }

// settled: a finished charge attempt never changes.
func (chargeOperation) settled(Attempt) bool { return true }

// recheck: a charge attempt that does not wait has nothing to read, but an
// authorization it made may have lapsed (the provider says it changed):
// its expiry is recorded as the watch would.
func (op chargeOperation) recheck(ctx context.Context, m Merchant, a Attempt) (Status, error) {
	if t := a.charge(); t.Input.CaptureMethod == CaptureManual && t.Charge != nil {
		return a.Status, op.s.recheckAuthorization(ctx, m, t.Charge.ID)
	}
	return a.Status, nil
}

func (op chargeOperation) observe(a Attempt, o outcome, by holder, now time.Time) {
	op.s.metrics.Charges.WithLabelValues(outcomeLabel(o), by.label()).Inc()
	op.s.observeAuthentication(a, o, now)
}

// abandon cancels the payment o, which waits for the shopper, at the
// provider: a confirmed cancel is a failure; a cancel refused because the
// shopper completed meanwhile is that payment.
func (op chargeOperation) abandon(ctx context.Context, m Merchant, a Attempt, o outcome) (outcome, error) {
	pc, err := op.s.provider.CancelCharge(ctx, providerRequest(m, a), o.ProviderID)
	return chargeOutcome(pc, nil), err
}

// providerRequest is the charge request for attempt a. It must be the same
// on every send, or the provider refuses the repeat of our key.
func providerRequest(m Merchant, a Attempt) ProviderChargeRequest {
	in := a.charge().Input
	req := ProviderChargeRequest{
		IdempotencyKey:   a.ProviderKey,
		AttemptID:        a.ID,
		AttemptCreatedAt: a.CreatedAt,
		Amount:           in.Amount,
		Currency:         in.Currency,
		PaymentMethod:    in.PaymentMethod,
		Description:      in.Description,
		CaptureMethod:    in.CaptureMethod,
		Metadata: map[string]string{
			"chargeonce_attempt_id":  a.ID.String(),
			"client_idempotency_key": a.IdempotencyKey,
			"merchant":               m.Name,
		},
	}
	if in.OrderID != "" {
		req.Metadata["order_id"] = in.OrderID
	}
	if in.ReturnURL != "" {
		req.ReturnURL = returnURL(in.ReturnURL, a.IdempotencyKey)
	}
	return req
}

// returnURL is raw with the attempt's idempotency key added to its query
// (ReturnKeyParam), so that the page the shopper comes back to can resume
// the attempt even when its own storage is gone. raw was validated.
func returnURL(raw, key string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set(ReturnKeyParam, key)
	u.RawQuery = q.Encode()
	return u.String()
}

// withCharge is a, a charge attempt, with the charge c it made.
func (a Attempt) withCharge(c *Charge) Attempt {
	t := a.charge()
	t.Charge = c
	a.Terms = t
	return a
}

// authorizedUntil is until when the provider holds an authorization it
// answered with detail at now: as it says, or, when it does not say, for
// the usual window.
func authorizedUntil(detail chargeDetail, now time.Time) time.Time {
	until := now.Add(AuthorizationWindowDefault)
	if auth := detail.authorization; auth != nil && !auth.ExpiresAt.IsZero() {
		until = auth.ExpiresAt
	}
	return until.Truncate(time.Microsecond)
}
