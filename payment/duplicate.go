package payment

import (
	"context"
)

// No charge taken twice for one attempt. An attempt makes one provider
// charge, under its provider key; a provider's bug or a stray send can
// leave a second successful one for the same attempt, which a lookup by the
// attempt finds (every provider returns all of an attempt's charges,
// FindCharges). The attempt settles on the first (settleOn); each other
// one is recorded as a charge of its own (duplicate_of names the attempt),
// announced as charge.duplicate_refunded, in the transaction that records
// the attempt's own charge, and refunded whole by the reconciler under one
// refund key per duplicate, so that every instance and every pass refunds
// it once. The attempt's answer does not change: the shopper paid once,
// and is made whole for the rest.

// settleOn is the attempt's charge among charges, all that the provider
// holds for it, oldest first, and the duplicates: the first that
// succeeded, with the other successful ones to be refunded. Without a
// success, the newest that waits for the shopper, since only a waiting
// charge may still take the money, and the attempt must not fail while
// one does; else the newest, the answer to the latest send. nil for none.
func settleOn(charges []ProviderCharge) (_ *ProviderCharge, duplicates []string) {
	var first *ProviderCharge
	for i := range charges {
		if !charges[i].Succeeded {
			continue
		}
		if first == nil {
			first = &charges[i]
		} else {
			duplicates = append(duplicates, charges[i].ID)
		}
	}
	if first != nil {
		return first, duplicates
	}
	for i := len(charges) - 1; i >= 0; i-- {
		if charges[i].waiting() {
			return &charges[i], nil
		}
	}
	if len(charges) == 0 {
		return nil, nil
	}
	return &charges[len(charges)-1], nil
}

// announceDuplicates counts and logs the duplicates of attempt a just
// recorded; the reconciler refunds them.
func (s *Service) announceDuplicates(ctx context.Context, a Attempt, settledOn string, recorded []Charge) {
	for _, c := range recorded {
		s.metrics.DuplicateCharges.Inc()
		attemptLogger(s.log, Merchant{}, a).WarnContext(ctx, "the provider holds a second successful charge for one attempt; refunding it",
			"provider_charge_id", c.ProviderChargeID, "charge_id", c.ID, "settled_on", settledOn)
	}
}
