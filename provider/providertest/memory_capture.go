package providertest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strings"

	"chargeonce/payment"
)

// Authorize now, capture later, as the simulator models it: a manual
// charge that succeeds is an authorization, open until its window ends;
// captures take part or all of it, once per key, and one marked final
// releases the rest; a void releases all of it. A capture or void that the
// authorization refuses (expired, voided, captured, more than remains) is
// answered with payment's Failure* code, and nothing is stored. Each is
// decided whole under Memory's lock, so no interleaving captures more than
// was authorized, or both captures and voids one authorization.

// memCapture is a capture Memory holds: made, or declined by the card.
type memCapture struct {
	made
	req                         payment.ProviderCaptureRequest // as first sent
	amount                      int64
	failureCode, failureMessage string // set when declined
	lost                        bool   // its answers are lost (CardCaptureLostResponse)
}

func (cp *memCapture) view() payment.ProviderCapture {
	if cp.failureCode != "" {
		return payment.ProviderCapture{ID: cp.id, FailureCode: cp.failureCode, FailureMessage: cp.failureMessage}
	}
	return payment.ProviderCapture{ID: cp.id, Succeeded: true}
}

// memVoid is a void Memory holds: one that was made.
type memVoid struct {
	made
	req payment.ProviderVoidRequest // as first sent
}

func (v *memVoid) view() payment.ProviderVoid { return payment.ProviderVoid{ID: v.id, Succeeded: true} }

// CaptureCharge implements payment.Provider.
func (m *Memory) CaptureCharge(ctx context.Context, req payment.ProviderCaptureRequest) (payment.ProviderCapture, error) {
	m.record(req.IdempotencyKey)
	waitErr := error(nil)
	if m.cardOf(req.ProviderChargeID).captures == capturesSlow {
		waitErr = wait(ctx, m.slowDelay)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cp, refused, err := m.capture(req)
	switch {
	case err != nil:
		return payment.ProviderCapture{}, err
	case waitErr != nil:
		// Decided all the same; the caller does not know how.
		return payment.ProviderCapture{}, fmt.Errorf("providertest: the caller stopped waiting (%v): %w", waitErr, payment.ErrOutcomeUnknown)
	case refused != nil:
		return payment.ProviderCapture{FailureCode: refused.code, FailureMessage: refused.message}, nil
	case cp.lost:
		return payment.ProviderCapture{}, fmt.Errorf("providertest: capture %s was made and its answer lost: %w", cp.id, payment.ErrOutcomeUnknown)
	}
	return cp.view(), nil
}

// capture decides req: the capture of its key, a new one, or a refusal.
// m.mu is held.
func (m *Memory) capture(req payment.ProviderCaptureRequest) (*memCapture, *refusal, error) {
	if cp, ok := m.captures.byKey[req.IdempotencyKey]; ok {
		if !sameCapture(cp.req, req) {
			return nil, nil, fmt.Errorf("providertest: key %s was used with other parameters (409): %w",
				req.IdempotencyKey, payment.ErrOutcomeUnknown)
		}
		return cp, nil, nil
	}
	c := m.chargeByID[req.ProviderChargeID]
	if c == nil {
		return nil, &refusal{"resource_missing", fmt.Sprintf("No such charge: %q.", req.ProviderChargeID)}, nil
	}
	if req.Currency != "" && !strings.EqualFold(req.Currency, c.req.Currency) {
		return nil, &refusal{"currency_mismatch", fmt.Sprintf("The capture's currency, %s, is not the charge's, %s.",
			req.Currency, c.req.Currency)}, nil
	}
	if refused := m.refuses(c, "captured"); refused != nil {
		return nil, refused, nil
	}
	remaining := c.auth.amount - c.auth.captured
	amount := cmp.Or(req.Amount, remaining)
	if amount > remaining {
		return nil, &refusal{payment.FailureCaptureExceedsAuthorization, fmt.Sprintf(
			"The capture of %d is greater than what remains capturable of the authorization, %d.", amount, remaining)}, nil
	}
	req.Metadata = maps.Clone(req.Metadata)
	cp := &memCapture{made: made{id: newID("cp_"), chargeID: c.id, attemptID: req.AttemptID}, req: req, amount: amount,
		lost: c.card.captures == capturesLoseResponse}
	m.captures.add(req.IdempotencyKey, cp)
	if c.card.captures == capturesDeclined {
		cp.failureCode, cp.failureMessage = "card_declined", "The card's issuer declined the capture. Nothing was captured."
		return cp, nil, nil
	}
	c.auth.captured += amount
	if req.Final || c.auth.captured == c.auth.amount {
		c.auth.state = payment.AuthorizationCaptured
	}
	return cp, nil, nil
}

// sameCapture reports whether b asks for what a asked.
func sameCapture(a, b payment.ProviderCaptureRequest) bool {
	return a.ProviderChargeID == b.ProviderChargeID && a.Amount == b.Amount && a.Currency == b.Currency &&
		a.Final == b.Final && maps.Equal(a.Metadata, b.Metadata)
}

// FindCapture implements payment.Provider: the capture of req's key, or
// else the one of the charge's that req's attempt sent; nil when there is
// none. It never sends.
func (m *Memory) FindCapture(_ context.Context, req payment.ProviderCaptureRequest) (*payment.ProviderCapture, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return foundIn(&m.captures, req.IdempotencyKey, req.AttemptID, req.ProviderChargeID, (*memCapture).view), nil
}

// VoidCharge implements payment.Provider.
func (m *Memory) VoidCharge(_ context.Context, req payment.ProviderVoidRequest) (payment.ProviderVoid, error) {
	m.record(req.IdempotencyKey)
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.voids.byKey[req.IdempotencyKey]; ok {
		if v.req.ProviderChargeID != req.ProviderChargeID || !maps.Equal(v.req.Metadata, req.Metadata) {
			return payment.ProviderVoid{}, fmt.Errorf("providertest: key %s was used with other parameters (409): %w",
				req.IdempotencyKey, payment.ErrOutcomeUnknown)
		}
		return v.view(), nil
	}
	c := m.chargeByID[req.ProviderChargeID]
	refused := &refusal{"resource_missing", fmt.Sprintf("No such charge: %q.", req.ProviderChargeID)}
	if c != nil {
		refused = m.refuses(c, "voided")
	}
	if refused != nil {
		return payment.ProviderVoid{FailureCode: refused.code, FailureMessage: refused.message}, nil
	}
	req.Metadata = maps.Clone(req.Metadata)
	v := &memVoid{made: made{id: newID("vd_"), chargeID: c.id, attemptID: req.AttemptID}, req: req}
	m.voids.add(req.IdempotencyKey, v)
	c.auth.state = payment.AuthorizationVoided
	return v.view(), nil
}

// FindVoid implements payment.Provider, as FindCapture.
func (m *Memory) FindVoid(_ context.Context, req payment.ProviderVoidRequest) (*payment.ProviderVoid, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return foundIn(&m.voids, req.IdempotencyKey, req.AttemptID, req.ProviderChargeID, (*memVoid).view), nil
}

// ReadAuthorization implements payment.Provider: the authorization as it
// is now (an open one past its time reads expired).
func (m *Memory) ReadAuthorization(_ context.Context, providerChargeID string) (payment.ProviderAuthorization, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.chargeByID[providerChargeID]
	if c == nil || c.auth == nil {
		return payment.ProviderAuthorization{}, fmt.Errorf("providertest: read authorization: %q is no authorization", providerChargeID)
	}
	return *c.view(m.now()).Authorization, nil
}

// Expire makes the open authorization providerChargeID lapse now, as if
// its window had passed (the simulator's control for tests). An
// authorization that is not open is left alone: an error.
func (m *Memory) Expire(providerChargeID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	c := m.chargeByID[providerChargeID]
	if c == nil || c.auth == nil || c.auth.stateAt(now) != payment.AuthorizationOpen {
		return fmt.Errorf("providertest: expire: %q is no open authorization", providerChargeID)
	}
	c.auth.state = payment.AuthorizationExpired
	if now.Before(c.auth.expiresAt) {
		c.auth.expiresAt = now
	}
	return nil
}

// refusal is a capture or void the authorization refuses.
type refusal struct{ code, message string }

// refuses is the refusal of a capture or void (done says which: "captured"
// or "voided") of c at m's now; nil when c's authorization is open. A
// capture checks the amount besides. m.mu is held.
func (m *Memory) refuses(c *memCharge, done string) *refusal {
	if c.auth == nil {
		return &refusal{payment.FailureChargeNotCapturable, fmt.Sprintf(
			"This charge is no authorization (status %s): it cannot be %s.", c.status, done)}
	}
	switch state := c.auth.stateAt(m.now()); {
	case state == payment.AuthorizationExpired:
		return &refusal{payment.FailureAuthorizationExpired, "This authorization expired: nothing more can be captured or voided."}
	case state == payment.AuthorizationVoided:
		return &refusal{payment.FailureChargeVoided, "This authorization was voided: nothing can be " + done + "."}
	case done == "voided" && (state == payment.AuthorizationCaptured || c.auth.captured > 0):
		return &refusal{payment.FailureChargeCaptured, "This authorization has a capture: it can no longer be voided (refund the capture instead)."}
	case state == payment.AuthorizationCaptured:
		return &refusal{payment.FailureChargeNotCapturable, "This authorization was captured in full, or its final capture made: nothing more can be captured."}
	}
	return nil
}

// cardOf is the card of charge id; the zero card when there is none.
func (m *Memory) cardOf(id string) card {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.chargeByID[id]; c != nil {
		return c.card
	}
	return card{}
}
