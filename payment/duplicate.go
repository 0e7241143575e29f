package payment

import (
	"context"
	"log/slog"

	"github.com/google/uuid"
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

// duplicateRefundKey is the idempotency key of the refund of duplicate
// charge c: one per duplicate, whoever refunds it.
func duplicateRefundKey(c uuid.UUID) string { return "chargeonce_duplicate_" + c.String() }

// dueDuplicate is a recorded duplicate charge whose refund is due.
type dueDuplicate struct {
	ID, MerchantID   uuid.UUID
	ProviderChargeID string
	AttemptID        uuid.UUID // the attempt it duplicates
}

// announceDuplicates counts and logs the duplicates of attempt a just
// recorded; the reconciler refunds them.
func (s *Service) announceDuplicates(ctx context.Context, a Attempt, settledOn string, recorded []Charge) {
	for _, c := range recorded {
		s.metrics.DuplicateCharges.Inc()
		s.log.WarnContext(ctx, "the provider holds a second successful charge for one attempt; refunding it",
			"merchant_id", a.MerchantID, "idempotency_key", a.IdempotencyKey, "attempt_id", a.ID,
			"provider_charge_id", c.ProviderChargeID, "charge_id", c.ID, "settled_on", settledOn)
	}
}

// refundDuplicates claims the refund of up to limit recorded duplicates
// whose refund is due, and returns how many it took.
func (s *Service) refundDuplicates(ctx context.Context, log *slog.Logger, limit int) (int, error) {
	rows, err := s.store.takeDueDuplicates(ctx, s.cfg.Now(), limit)
	if err != nil {
		return 0, err
	}
	for _, c := range rows {
		l := log.With("merchant_id", c.MerchantID, "charge_id", c.ID, "provider_charge_id", c.ProviderChargeID, "attempt_id", c.AttemptID)
		if err := s.refundDuplicate(ctx, l, c); err != nil {
			l.WarnContext(ctx, "duplicate charge: claiming its refund failed; the next pass tries again", "err", err)
		}
	}
	return len(rows), nil
}

func (s *Service) refundDuplicate(ctx context.Context, log *slog.Logger, c dueDuplicate) error {
	m, err := s.store.merchant(ctx, c.MerchantID)
	if err != nil {
		return err
	}
	if err := s.refundOwed(ctx, log, m, duplicateRefundKey(c.ID), c.ID, "the provider charged twice for one attempt"); err != nil {
		return err
	}
	return s.store.endDuplicateRefundDue(ctx, c.ID)
}
