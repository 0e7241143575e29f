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

// watchLateCharges reads the provider about up to limit watched attempts
// whose read is due, and refunds a late charge found; it returns how many
// it read.
func (s *Service) watchLateCharges(ctx context.Context, log *slog.Logger, limit int) (int, error) {
	attempts, err := s.store.takeLateChecks(ctx, s.cfg.Now(), limit)
	if err != nil {
		return 0, err
	}
	for _, a := range attempts {
		l := attemptLogger(log, Merchant{}, a)
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
		found, err := s.op(a).read(ctx, m, a)
		if err != nil || found == nil || !found.succeeded() {
			return err // nothing charged: the next read, until the watch ends
		}
		detail, _ := found.detail.(chargeDetail)
		var recorded bool
		var duplicates []Charge
		now := s.cfg.Now()
		if a, recorded, duplicates, err = s.store.recordLate(ctx, a, found.ProviderID, detail.duplicates, authorizedUntil(detail, now), now); err != nil {
			return err
		}
		s.announceDuplicates(ctx, a, found.ProviderID, duplicates)
		if recorded {
			s.metrics.LateCharges.Inc()
			log.WarnContext(ctx, "a charge completed at the provider after its attempt failed as provider_unavailable; refunding it",
				"provider_charge_id", found.ProviderID, "charge_id", a.LateChargeID, "provider_key", a.ProviderKey)
		}
	}
	owe := s.refundOwed
	if a.charge().Input.CaptureMethod == CaptureManual {
		// A late authorization took no money yet: it is voided, not refunded.
		owe = s.voidOwed
	}
	if err := owe(ctx, log.With("charge_id", a.LateChargeID), m, lateRefundKey(a), a.LateChargeID,
		"charged after the attempt failed as provider_unavailable"); err != nil {
		return err
	}
	return s.store.endLateWatch(ctx, a.ID)
}

// lateEventOf is the charge.late_refunded of failed attempt a, whose late
// charge c is being refunded (charge.late_voided: a late authorization,
// being voided), occurring at now.
func lateEventOf(a Attempt, c *Charge, now time.Time) Event {
	e := chargeEventOf(a, now)
	e.Type = EventChargeLateRefunded
	if a.charge().Input.CaptureMethod == CaptureManual {
		e.Type = EventChargeLateVoided
	}
	e.Charge = &EventCharge{ID: c.ID, ProviderChargeID: c.ProviderChargeID, CreatedAt: c.CreatedAt.UTC()}
	return e
}
