package providertest

import "chargeonce/payment"

// What a test reads of Memory, the ground truth it counts, and the control
// that spends keys. Each reads everything as it is now, by Memory's clock.

// Charges are the charges Memory holds whose metadata holds value under
// metadataKey (every charge when metadataKey is ""), oldest first, each as
// FindCharges answers it.
func (m *Memory) Charges(metadataKey, value string) []payment.ProviderCharge {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var found []payment.ProviderCharge
	for _, c := range m.charges {
		if v, ok := c.req.Metadata[metadataKey]; metadataKey == "" || ok && v == value {
			found = append(found, c.view(now))
		}
	}
	return found
}

// ChargeKeys are the provider keys that the charges Memory holds were made
// under, one per charge, oldest first.
func (m *Memory) ChargeKeys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]string, 0, len(m.charges))
	for _, c := range m.charges {
		keys = append(keys, c.req.IdempotencyKey)
	}
	return keys
}

// ChargeStatus is charge id's status in the simulator's words: succeeded,
// failed, requires_action (it waits for the shopper) or canceled (it
// stopped waiting at a cancel); "" for a charge Memory does not hold.
func (m *Memory) ChargeStatus(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.chargeByID[id]; c != nil {
		return c.status
	}
	return ""
}

// RefundsHeld says how many of charge chargeID's refunds hold money
// (pending or succeeded, not failed), and their sum.
func (m *Memory) RefundsHeld(chargeID string) (n int, amount int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, r := range m.refunds.of(chargeID) {
		if r.holds(now) {
			n++
			amount += r.amount
		}
	}
	return n, amount
}

// Captures are charge chargeID's captures, made or declined, oldest first,
// as FindCapture answers each.
func (m *Memory) Captures(chargeID string) []payment.ProviderCapture {
	m.mu.Lock()
	defer m.mu.Unlock()
	return viewsOf(&m.captures, chargeID, (*memCapture).view)
}

// Voids are charge chargeID's voids, oldest first, as FindVoid answers
// each.
func (m *Memory) Voids(chargeID string) []payment.ProviderVoid {
	m.mu.Lock()
	defer m.mu.Unlock()
	return viewsOf(&m.voids, chargeID, (*memVoid).view)
}

// KeysSent are the provider keys of every send (CreateCharge,
// CreateRefund, CaptureCharge, VoidCharge), in the order sent, repeats
// included: a key rotated while an outcome was unknown shows here.
func (m *Memory) KeysSent() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.sent...)
}

// SpendNextKeys spends the keys of the next n charges sent under keys
// Memory has not seen, as Stripe does when it saves a 500 for a key: that
// send fails with an error wrapping payment.ErrOutcomeUnknown, every later
// send under the key with one wrapping payment.ErrProviderKeySpent, and
// nothing is charged.
func (m *Memory) SpendNextKeys(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spendNext += n
}
