package payment

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
)

// No late charge left behind. After RedriveWindow, a charge attempt the
// provider never showed a charge for ends FAILED provider_unavailable
// (settle.go). A send still in flight at that moment can complete at the
// provider later: the shopper is charged and was told the card was not.
// So such an attempt stays watched for LateChargeWatch, on a widening
// schedule (5 min, 1 h, 6 h after the failure, and at the watch's end),
// by reading the provider (FindCharges: by the attempt, whatever its
// provider key; never a create). A successful charge found for it
// is recorded as a charge of its own, named on the attempt
// (late_charge_id), announced as charge.late_refunded, and refunded
// whole under one refund key derived from the attempt, so that every
// instance and every pass refunds it once. The attempt stays FAILED: the
// shopper was told so, and is now made whole.

// FailureProviderUnavailable is the failure of an attempt the provider
// never answered within the redrive window.
const FailureProviderUnavailable = "provider_unavailable"

// lateChargeFirstCheck is the watch's first read after the failure.
const lateChargeFirstCheck = 5 * time.Minute

// lateRefundKey is the idempotency key of the refund of attempt a's late
// charge: one per attempt, whoever refunds it.
func lateRefundKey(a Attempt) string { return "chargeonce_late_" + a.ID.String() }

// watchLateCharges reads the provider about up to limit watched attempts
// whose read is due, and refunds a late charge found; it returns how many
// it read.
func (s *Service) watchLateCharges(ctx context.Context, log *slog.Logger, limit int) (int, error) {
	attempts, err := s.store.takeLateChecks(ctx, s.cfg.Now(), limit)
	if err != nil {
		return 0, err
	}
	for _, a := range attempts {
		l := log.With("merchant_id", a.MerchantID, "idempotency_key", a.IdempotencyKey, "attempt_id", a.ID)
		if err := s.checkLate(ctx, l, a); err != nil {
			l.WarnContext(ctx, "late-charge watch: the read or the refund failed; the next read tries again", "err", err)
		}
	}
	return len(attempts), nil
}

// checkLate reads the provider about failed attempt a and refunds the late
// charge it holds for it, if any.
func (s *Service) checkLate(ctx context.Context, log *slog.Logger, a Attempt) error {
	m, err := s.store.merchant(ctx, a.MerchantID)
	if err != nil {
		return err
	}
	if a.LateChargeID == uuid.Nil {
		found, err := s.find(ctx, m, a)
		if err != nil || found == nil || !found.Succeeded {
			return err // nothing charged: the next read, until the watch ends
		}
		var recorded bool
		var duplicates []Charge
		if a, recorded, duplicates, err = s.store.recordLate(ctx, a, found.ID, found.duplicates, s.cfg.Now()); err != nil {
			return err
		}
		s.announceDuplicates(ctx, a, found.ID, duplicates)
		if recorded {
			s.metrics.LateCharges.Inc()
			log.WarnContext(ctx, "a charge completed at the provider after its attempt failed as provider_unavailable; refunding it",
				"provider_charge_id", found.ID, "charge_id", a.LateChargeID, "provider_key", a.ProviderKey)
		}
	}
	if err := s.refundOwed(ctx, log.With("charge_id", a.LateChargeID), m, lateRefundKey(a), a.LateChargeID,
		"charged after the attempt failed as provider_unavailable"); err != nil {
		return err
	}
	return s.store.endLateWatch(ctx, a.ID)
}

// refundOwed claims the whole refund of charge, which chargeonce owes the
// shopper (a late or a duplicate charge), under key, the one refund key
// that every instance and pass uses for it. A charge refunded already
// (REFUND_EXCEEDS_CHARGE) owes nothing more; a claimed refund is finished
// by the reconciler like any other.
func (s *Service) refundOwed(ctx context.Context, log *slog.Logger, m Merchant, key string, charge uuid.UUID, reason string) error {
	r, err := s.refund(ctx, m, key, RefundInput{ChargeID: charge, Reason: reason})
	if err != nil && ErrorCode(err) != EREFUNDEXCEEDS {
		return err
	}
	log.InfoContext(ctx, "refund owed: claimed", "refund_key", key, "refund_status", r.Status)
	return nil
}

// lateEventOf is the charge.late_refunded of failed attempt a, whose late
// charge c is being refunded, occurring at now.
func lateEventOf(a Attempt, c *Charge, now time.Time) Event {
	e := eventOf(a, now)
	e.Type = EventChargeLateRefunded
	e.Charge = &EventCharge{ID: c.ID, ProviderChargeID: c.ProviderChargeID, CreatedAt: c.CreatedAt.UTC()}
	return e
}
