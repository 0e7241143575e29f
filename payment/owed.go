package payment

import (
	"context"
	"log/slog"

	"github.com/google/uuid"
)

// Money owed back. Two things leave the shopper charged when they should
// not be: a late charge of an attempt that failed (late.go) and a
// provider's second charge for one attempt (duplicate.go). Each is found,
// recorded once whoever finds it, and then given back by one scheduler,
// here: a refund claimed under one key derived from what is owed, so that
// every instance and every pass gives it back once, and finished by the
// reconciler like any other refund.

// giveBackOwed is the scheduler's pass, after the reconciler's: the failed
// attempts watched for a late charge whose read is due, then the recorded
// duplicates whose refund is still to claim, up to limit of each.
func (s *Service) giveBackOwed(ctx context.Context, log *slog.Logger, limit int) {
	if _, err := s.watchLateCharges(ctx, log, limit); err != nil {
		log.WarnContext(ctx, "late-charge watch failed; the next pass tries again", "err", err)
	}
	if _, err := s.refundDuplicates(ctx, log, limit); err != nil {
		log.WarnContext(ctx, "duplicate-charge refunds failed; the next pass tries again", "err", err)
	}
	// And the authorizations about to lapse, or lapsed: nothing owed, but
	// money held that nobody may be about to take.
	s.watchAuthorizations(ctx, log, limit)
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

// voidOwed claims the void of the authorization charge, which chargeonce
// owes the shopper (a late authorization), under key, the one key that
// every instance and pass uses for it. An authorization voided or expired
// already owes nothing more; a claimed void is finished by the reconciler
// like any other.
func (s *Service) voidOwed(ctx context.Context, log *slog.Logger, m Merchant, key string, charge uuid.UUID, _ string) error {
	r, err := s.void(ctx, m, key, VoidInput{ChargeID: charge})
	if code := ErrorCode(err); err != nil && code != EVOIDED && code != EAUTHEXPIRED {
		return err
	}
	log.InfoContext(ctx, "void owed: claimed", "void_key", key, "void_status", r.Status)
	return nil
}

// lateRefundKey is the idempotency key of the refund of attempt a's late
// charge: one per attempt, whoever refunds it.
func lateRefundKey(a Attempt) string { return "chargeonce_late_" + a.ID.String() }

// duplicateRefundKey is the idempotency key of the refund of duplicate
// charge c: one per duplicate, whoever refunds it.
func duplicateRefundKey(c uuid.UUID) string { return "chargeonce_duplicate_" + c.String() }

// dueDuplicate is a recorded duplicate charge whose refund is due.
type dueDuplicate struct {
	ID, MerchantID   uuid.UUID
	ProviderChargeID string
	AttemptID        uuid.UUID // the attempt it duplicates
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
