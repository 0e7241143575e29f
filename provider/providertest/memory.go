package providertest

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"chargeonce/payment"
)

// Memory is a payment.Provider that keeps its charges, refunds, captures
// and voids in memory, safe for concurrent use: the card simulator's
// behaviours (chosen by the card, as its tokens choose them) without HTTP
// or a database, for the tests of package payment. Memory passes Run with
// every behaviour offered.
//
// Its observations and controls speak payment's types and plain values
// only, so that payment's own tests, which cannot import this package (it
// imports payment), can name them in an interface of their own.
type Memory struct {
	slowDelay           time.Duration
	refundSettle        time.Duration
	authorizationWindow time.Duration
	now                 func() time.Time

	// mu guards everything below: every decision (a charge of a key, a
	// refund, capture or void of a charge, a challenge pressed, a cancel)
	// is taken whole under it, so that no interleaving decides twice.
	mu          sync.Mutex
	charges     []*memCharge // oldest first
	chargeByID  map[string]*memCharge
	chargeByKey map[string]*memCharge
	refunds     kept[*memRefund]
	captures    kept[*memCapture]
	voids       kept[*memVoid]
	spendNext   int             // how many new keys still to spend (SpendNextKeys)
	spent       map[string]bool // keys whose saved failure is replayed
	sent        []string        // every provider key sent, in order
}

var _ payment.Provider = (*Memory)(nil)

// MemoryOptions tune a Memory. The zero value is ready to use: no slow
// delay, pending refunds that settle after MemoryRefundSettleDefault,
// authorizations open for MemoryAuthorizationWindowDefault, by the wall
// clock.
type MemoryOptions struct {
	// SlowDelay is how long a charge of CardSlow, and each capture of
	// CardCaptureSlow, takes; zero (or less) is none.
	SlowDelay time.Duration
	// RefundSettle is how long a pending refund (CardRefundPending,
	// CardRefundFailsLater) stays pending; zero (or less) is
	// MemoryRefundSettleDefault.
	RefundSettle time.Duration
	// AuthorizationWindow is how long an authorization (a manual charge
	// that succeeded) stays open from then; zero (or less) is
	// MemoryAuthorizationWindowDefault.
	AuthorizationWindow time.Duration
	// Now is the provider's clock, by which refunds settle and
	// authorizations lapse (both are read at every look, with nothing in
	// the background); nil is time.Now. A test hands in its own clock to
	// move them on without waiting.
	Now func() time.Time
}

// MemoryRefundSettleDefault is how long a pending refund of Memory stays
// pending unless configured.
const MemoryRefundSettleDefault = 2 * time.Second

// MemoryAuthorizationWindowDefault is how long an authorization of Memory
// stays open unless configured: a card network's usual hold of a week.
const MemoryAuthorizationWindowDefault = 7 * 24 * time.Hour

// MemoryChallengeURL is the address under which a waiting charge of Memory
// sends the shopper: its Action.URL is MemoryChallengeURL followed by the
// charge's id. Nothing serves it (.invalid): the shopper is a test calling
// PressChallenge with it.
const MemoryChallengeURL = "https://memory.provider.invalid/authenticate/"

// NewMemory returns an empty Memory.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{
		slowDelay:           max(opts.SlowDelay, 0),
		refundSettle:        opts.RefundSettle,
		authorizationWindow: opts.AuthorizationWindow,
		now:                 opts.Now,
		chargeByID:          map[string]*memCharge{},
		chargeByKey:         map[string]*memCharge{},
		refunds:             newKept[*memRefund](),
		captures:            newKept[*memCapture](),
		voids:               newKept[*memVoid](),
		spent:               map[string]bool{},
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.refundSettle <= 0 {
		m.refundSettle = MemoryRefundSettleDefault
	}
	if m.authorizationWindow <= 0 {
		m.authorizationWindow = MemoryAuthorizationWindowDefault
	}
	return m
}

// The statuses of a charge, in the simulator's words (ChargeStatus). Only
// a waiting one ever changes, once, to one of the others.
const (
	chargeSucceeded = "succeeded"
	chargeFailed    = "failed"
	chargeWaiting   = "requires_action"
	chargeCanceled  = "canceled"
)

// memCharge is a charge Memory holds.
type memCharge struct {
	id                          string
	req                         payment.ProviderChargeRequest // as first sent
	card                        card
	status                      string
	failureCode, failureMessage string
	// auth is set on a manual charge that succeeded.
	auth *memAuthorization
}

// memAuthorization is where the authorization of a manual charge stands
// as stored; stateAt says where it stands at a time.
type memAuthorization struct {
	state     payment.AuthorizationState
	amount    int64
	captured  int64
	expiresAt time.Time
}

// stateAt is a's state at now: an open one past its time has expired.
func (a *memAuthorization) stateAt(now time.Time) payment.AuthorizationState {
	if a.state == payment.AuthorizationOpen && !now.Before(a.expiresAt) {
		return payment.AuthorizationExpired
	}
	return a.state
}

// succeed makes c, the decision of a new charge or of its shopper,
// succeed at now: a manual one opens its authorization for the window.
func (m *Memory) succeed(c *memCharge, now time.Time) {
	c.status = chargeSucceeded
	if c.req.CaptureMethod == payment.CaptureManual {
		c.auth = &memAuthorization{state: payment.AuthorizationOpen, amount: c.req.Amount,
			expiresAt: now.Add(m.authorizationWindow)}
	}
}

// fail makes c fail with code and message.
func (c *memCharge) fail(status, code, message string) {
	c.status, c.failureCode, c.failureMessage = status, code, message
}

// view is c as the provider answers it at now.
func (c *memCharge) view(now time.Time) payment.ProviderCharge {
	switch c.status {
	case chargeSucceeded:
		pc := payment.ProviderCharge{ID: c.id, Succeeded: true}
		if c.auth != nil {
			pc.Authorization = &payment.ProviderAuthorization{State: c.auth.stateAt(now), Amount: c.auth.amount,
				Captured: c.auth.captured, ExpiresAt: c.auth.expiresAt}
		}
		return pc
	case chargeWaiting:
		return payment.ProviderCharge{ID: c.id, Action: &payment.ProviderAction{URL: MemoryChallengeURL + c.id}}
	default:
		return payment.ProviderCharge{ID: c.id, FailureCode: c.failureCode, FailureMessage: c.failureMessage}
	}
}

// CreateCharge implements payment.Provider. The card decides the charge
// (see the Card constants); a key already used answers its charge as it is
// now, a lost answer lost again, and another request under it is refused
// as a conflict (an unknown outcome, as the simulator's 409). A caller
// that stops waiting for a slow charge does not stop it: it is made, and
// the caller's outcome is unknown.
func (m *Memory) CreateCharge(ctx context.Context, req payment.ProviderChargeRequest) (payment.ProviderCharge, error) {
	m.record(req.IdempotencyKey)
	spec, known := cards[req.PaymentMethod]
	switch {
	case !known:
		// Refused before anything is stored, as the simulator's 400.
		return payment.ProviderCharge{FailureCode: "payment_method_unknown",
			FailureMessage: fmt.Sprintf("No such payment method: %q.", req.PaymentMethod)}, nil
	case spec.charge == providerError:
		// Before anything is stored, so every send fails alike.
		return payment.ProviderCharge{}, fmt.Errorf("providertest: the provider failed to process the charge (500): %w", payment.ErrOutcomeUnknown)
	}
	waitErr := error(nil)
	if spec.charge == slow {
		waitErr = wait(ctx, m.slowDelay)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.spent[req.IdempotencyKey]:
		return payment.ProviderCharge{}, fmt.Errorf("providertest: the saved failure of key %s, replayed: %w", req.IdempotencyKey, payment.ErrProviderKeySpent)
	case m.chargeByKey[req.IdempotencyKey] == nil && m.spendNext > 0:
		m.spendNext--
		m.spent[req.IdempotencyKey] = true
		return payment.ProviderCharge{}, fmt.Errorf("providertest: the provider failed and saved the failure for key %s (500): %w",
			req.IdempotencyKey, payment.ErrOutcomeUnknown)
	}
	c := m.chargeByKey[req.IdempotencyKey]
	if c != nil && !sameCharge(c.req, req) {
		return payment.ProviderCharge{}, fmt.Errorf("providertest: key %s was used with other parameters (409): %w",
			req.IdempotencyKey, payment.ErrOutcomeUnknown)
	}
	now := m.now()
	if c == nil {
		c = m.newCharge(req, spec, now)
	}
	switch {
	case waitErr != nil:
		return payment.ProviderCharge{}, fmt.Errorf("providertest: the caller stopped waiting (%v): %w", waitErr, payment.ErrOutcomeUnknown)
	case c.card.charge == loseResponse:
		return payment.ProviderCharge{}, fmt.Errorf("providertest: charge %s was made and its answer lost: %w", c.id, payment.ErrOutcomeUnknown)
	}
	return c.view(now), nil
}

// newCharge stores the charge of req, decided by spec at now. m.mu is held.
func (m *Memory) newCharge(req payment.ProviderChargeRequest, spec card, now time.Time) *memCharge {
	req.Metadata = maps.Clone(req.Metadata)
	c := &memCharge{id: newID("ch_"), req: req, card: spec}
	switch {
	case spec.charge == decline:
		c.fail(chargeFailed, spec.declineCode, spec.declineMessage)
	case spec.charge == authenticate && req.ReturnURL != "":
		c.status = chargeWaiting
	case spec.charge == authenticate:
		c.fail(chargeFailed, payment.FailureAuthenticationRequired, "This card requires authentication (3-D Secure), "+
			"but the charge has no return URL to send the shopper back to after it. The card was not charged.")
	default:
		m.succeed(c, now)
	}
	m.charges = append(m.charges, c)
	m.chargeByID[c.id] = c
	m.chargeByKey[req.IdempotencyKey] = c
	return c
}

// sameCharge reports whether b asks for what a asked, as the simulator
// compares what a charge's request sends.
func sameCharge(a, b payment.ProviderChargeRequest) bool {
	return a.Amount == b.Amount && a.Currency == b.Currency && a.PaymentMethod == b.PaymentMethod &&
		a.Description == b.Description && a.ReturnURL == b.ReturnURL &&
		cmp.Or(a.CaptureMethod, payment.CaptureAutomatic) == cmp.Or(b.CaptureMethod, payment.CaptureAutomatic) &&
		maps.Equal(a.Metadata, b.Metadata)
}

// FindCharges implements payment.Provider: the charges of req's attempt
// (of its key, for a request that names none), oldest first, as they are
// now.
func (m *Memory) FindCharges(_ context.Context, req payment.ProviderChargeRequest) ([]payment.ProviderCharge, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var found []payment.ProviderCharge
	for _, c := range m.charges {
		if req.AttemptID != uuid.Nil && c.req.AttemptID == req.AttemptID ||
			req.AttemptID == uuid.Nil && c.req.IdempotencyKey == req.IdempotencyKey {
			found = append(found, c.view(now))
		}
	}
	return found, nil
}

// CancelCharge implements payment.Provider: a charge that waits for the
// shopper is cancelled, abandoned; any other is answered as it ended.
func (m *Memory) CancelCharge(_ context.Context, _ payment.ProviderChargeRequest, id string) (payment.ProviderCharge, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.chargeByID[id]
	if c == nil {
		return payment.ProviderCharge{}, fmt.Errorf("providertest: cancel: no such charge %q", id)
	}
	if c.status == chargeWaiting {
		c.fail(chargeCanceled, payment.FailureAuthenticationAbandoned,
			"The payment was cancelled: the shopper did not authenticate in time.")
	}
	return c.view(m.now()), nil
}

// PressChallenge presses a button, "complete" or "fail", of the challenge
// at challengeURL (a waiting charge's Action.URL), as the shopper does,
// and returns where the shopper is sent back: the charge's return URL.
// A charge that waits ends so, succeeded (an authorization opens) or
// failed with payment.FailureAuthenticationFailed; one that no longer
// waits (a second press, a cancel that won) is left as it is, as the
// simulator's page does.
func (m *Memory) PressChallenge(challengeURL, button string) (*url.URL, error) {
	id, ok := strings.CutPrefix(challengeURL, MemoryChallengeURL)
	if !ok {
		return nil, fmt.Errorf("providertest: %q is no challenge of this provider", challengeURL)
	}
	if button != "complete" && button != "fail" {
		return nil, fmt.Errorf("providertest: the challenge has no button %q (complete, fail)", button)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.chargeByID[id]
	switch {
	case c == nil:
		return nil, fmt.Errorf("providertest: no such payment %q to authenticate", id)
	case c.req.ReturnURL == "":
		return nil, fmt.Errorf("providertest: payment %s never waited: there is nowhere to send the shopper back", id)
	case c.status == chargeWaiting && button == "complete":
		m.succeed(c, m.now())
	case c.status == chargeWaiting:
		c.fail(chargeFailed, payment.FailureAuthenticationFailed,
			"The shopper failed the card's authentication (3-D Secure). The card was not charged.")
	}
	return url.Parse(c.req.ReturnURL)
}

// record notes a send under key.
func (m *Memory) record(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, key)
}

// wait takes d, or until ctx ends (its error).
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newID returns prefix ("ch_", "re_", "cp_", "vd_") and 26 random
// characters: ids nobody can guess, unique across Memories.
func newID(prefix string) string { return prefix + rand.Text() }
