package payment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
	"chargeonce/sqlc"
)

// The store's captures and voids: the claims that reserve an
// authorization's money (or its void) on the locked charge, the fenced
// writes that record them, and the reads of an authorization.

func init() {
	termsFromRow[KindCapture] = captureTermsFromRow
	termsFromRow[KindVoid] = voidTermsFromRow
}

// constraintProviderCaptureID: one capture row per provider capture.
const constraintProviderCaptureID = "captures_provider_capture_id_unique"

// captureTermsFromRow are the terms of a capture attempt's row, with its
// capture when it SUCCEEDED.
func captureTermsFromRow(row attemptRow) Terms {
	r := row.ChargeAttempt
	t := CaptureTerms{Of: deref(r.ChargeID), OfProvider: deref(row.providerChargeID), Amount: r.Amount,
		Currency: r.Currency, Final: deref(r.CaptureFinal)}
	if Status(r.Status) == StatusSucceeded {
		t.Capture = &Capture{ID: deref(r.CaptureID), ChargeID: t.Of, Amount: t.Amount, Currency: t.Currency, Final: t.Final,
			CreatedAt: deref(r.CompletedAt)}
	}
	return t
}

// voidTermsFromRow are the terms of a void attempt's row, with its void
// when it SUCCEEDED.
func voidTermsFromRow(row attemptRow) Terms {
	r := row.ChargeAttempt
	t := VoidTerms{Of: deref(r.ChargeID), OfProvider: deref(row.providerChargeID), Amount: r.Amount, Currency: r.Currency}
	if Status(r.Status) == StatusSucceeded {
		t.Void = &Void{ID: r.ID, ChargeID: t.Of, CreatedAt: deref(r.CompletedAt)}
	}
	return t
}

// authorization is a charge's authorization as a claim on it reads it.
type authorization struct {
	sqlc.LockChargeForCaptureRow
}

// expired reports whether the authorization lapsed by now.
func (c authorization) expired(now time.Time) bool {
	return c.AuthorizationExpiredAt != nil || (c.AuthorizationExpiresAt != nil && !now.Before(*c.AuthorizationExpiresAt))
}

// claimOnCharge runs claim, a capture's or a void's, in one transaction
// that first locks the charge of a and reads the key's stored attempt, so
// that the claims on one charge are made one at a time and a retry of a
// claimed key is answered, not refused: foundStored with the stored
// attempt, claimedByUs with a as inserted, or claim's refusal.
func (s *store) claimOnCharge(ctx context.Context, a Attempt, of uuid.UUID,
	take func(q *txQueries, c authorization) (sqlc.ChargeAttempt, error)) (claim, error) {
	var c claim
	err := s.inTx(ctx, func(q *txQueries) error {
		row, err := q.LockChargeForCapture(ctx, sqlc.LockChargeForCaptureParams{ID: of, MerchantID: a.MerchantID})
		if isNotFound(err) {
			return &Error{Code: ECHARGENOTFOUND, Field: "input.chargeId",
				Message: "no charge of this merchant has this id; nothing was " + string(a.Kind) + "d"}
		}
		if err != nil {
			return err
		}
		if c, err = storedClaim(ctx, q, a); err == nil {
			return errRollback
		} else if !isNotFound(err) {
			return err
		}
		inserted, err := take(q, authorization{row})
		if isNotFound(err) {
			// The key was taken meanwhile: the insert waited for whoever took
			// it, so a new statement sees the stored attempt.
			if c, err = storedClaim(ctx, q, a); err != nil {
				return err
			}
			return errRollback
		}
		if err != nil {
			return err
		}
		c = claim{outcome: claimedByUs, attempt: attemptOf(attemptRow{ChargeAttempt: inserted, providerChargeID: &row.ProviderChargeID})}
		return nil
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return c, interpretError(err)
}

// claimCapture claims a's key for a capture of its amount (all that
// remains capturable when 0) of its charge's authorization, reserved by
// one conditional update in the claim's transaction, behind which
// charges_captures_check holds; refused with the domain's codes at now.
func (s *store) claimCapture(ctx context.Context, a Attempt, now time.Time) (claim, error) {
	t := a.capture()
	return s.claimOnCharge(ctx, a, t.Of, func(q *txQueries, c authorization) (sqlc.ChargeAttempt, error) {
		capturable := c.Amount - c.CaptureReserved
		switch {
		case c.CaptureMethod != string(CaptureManual):
			return sqlc.ChargeAttempt{}, &Error{Code: ENOTCAPTURABLE, Field: "input.chargeId",
				Message: "this charge was captured when it was made (captureMethod AUTOMATIC); nothing was captured"}
		case c.VoidClaimed:
			return sqlc.ChargeAttempt{}, &Error{Code: EVOIDED, Field: "input.chargeId",
				Message: "this authorization is voided, or being voided; nothing was captured"}
		case c.expired(now):
			return sqlc.ChargeAttempt{}, &Error{Code: EAUTHEXPIRED, Field: "input.chargeId",
				Message: "this authorization has expired; nothing was captured"}
		case c.FinalCaptureClaimed || capturable == 0:
			return sqlc.ChargeAttempt{}, &Error{Code: ENOTCAPTURABLE, Field: "input.chargeId",
				Message: "this authorization is captured in full, or its final capture is made or running; nothing was captured"}
		}
		amount := cmp.Or(t.Amount, capturable)
		if amount > capturable {
			return sqlc.ChargeAttempt{}, &Error{Code: ECAPTUREEXCEEDS, Field: "input.amount", Capturable: capturable,
				Message: fmt.Sprintf("the capture exceeds what remains capturable of the authorization (%d); nothing was captured", capturable)}
		}
		final := t.Final
		src := claimSource(ctx, s.hist)
		row, err := q.ClaimCaptureAttempt(ctx, sqlc.ClaimCaptureAttemptParams{
			ID: a.ID, MerchantID: a.MerchantID, IdempotencyKey: a.IdempotencyKey, Fingerprint: a.Fingerprint,
			ProviderKey: storedProviderKey(a.ID, a.ProviderKey), Kind: string(KindCapture), Amount: amount, Currency: c.Currency, ChargeID: &t.Of,
			CaptureFinal: &final, LockedUntil: a.LockedUntil, ExpiresAt: a.ExpiresAt,
			ClaimRequestID: src.RequestID, ClaimInstance: src.Instance, ClaimSource: src.Rest, CreatedAt: a.CreatedAt,
		})
		if err != nil {
			return row, err
		}
		if _, err := q.ReserveCapture(ctx, sqlc.ReserveCaptureParams{Amount: amount, Final: final, ID: t.Of}); isNotFound(err) {
			// The lock makes this unreachable; the CHECK would refuse it too.
			return row, &Error{Code: ECAPTUREEXCEEDS, Field: "input.amount", Capturable: capturable,
				Message: "the capture exceeds what remains capturable of the authorization; nothing was captured"}
		} else if err != nil {
			return row, err
		}
		return row, nil
	})
}

// claimVoid claims a's key for the void of its charge's authorization,
// marked on the charge by one conditional update in the claim's
// transaction: only while nothing was captured or is being captured.
func (s *store) claimVoid(ctx context.Context, a Attempt, now time.Time) (claim, error) {
	t := a.void()
	return s.claimOnCharge(ctx, a, t.Of, func(q *txQueries, c authorization) (sqlc.ChargeAttempt, error) {
		switch {
		case c.CaptureMethod != string(CaptureManual) || c.CaptureReserved > 0:
			return sqlc.ChargeAttempt{}, &Error{Code: ECAPTURED, Field: "input.chargeId",
				Message: "this charge has a capture, made or running (or was captured when it was made); nothing was voided. Refund what was captured; should a running capture fail, void again"}
		case c.VoidClaimed:
			return sqlc.ChargeAttempt{}, &Error{Code: EVOIDED, Field: "input.chargeId",
				Message: "this authorization is voided, or being voided, under another key; nothing was voided"}
		case c.expired(now):
			return sqlc.ChargeAttempt{}, &Error{Code: EAUTHEXPIRED, Field: "input.chargeId",
				Message: "this authorization has expired; the money is released already"}
		}
		src := claimSource(ctx, s.hist)
		row, err := q.ClaimCaptureAttempt(ctx, sqlc.ClaimCaptureAttemptParams{
			ID: a.ID, MerchantID: a.MerchantID, IdempotencyKey: a.IdempotencyKey, Fingerprint: a.Fingerprint,
			ProviderKey: storedProviderKey(a.ID, a.ProviderKey), Kind: string(KindVoid), Amount: c.Amount, Currency: c.Currency, ChargeID: &t.Of,
			LockedUntil: a.LockedUntil, ExpiresAt: a.ExpiresAt,
			ClaimRequestID: src.RequestID, ClaimInstance: src.Instance, ClaimSource: src.Rest, CreatedAt: a.CreatedAt,
		})
		if err != nil {
			return row, err
		}
		if _, err := q.ReserveVoid(ctx, t.Of); isNotFound(err) {
			return row, &Error{Code: ECAPTURED, Field: "input.chargeId", Message: "this charge has a capture; nothing was voided"}
		} else if err != nil {
			return row, err
		}
		return row, nil
	})
}

// succeedCapture records the provider's capture providerCaptureID (once,
// whoever records it), what the charge captured, the attempt SUCCEEDED and
// charge.captured, in one transaction fenced on a's fence.
func (s *store) succeedCapture(ctx context.Context, a Attempt, providerCaptureID string, now, expiresAt time.Time) (Attempt, error) {
	now = now.Truncate(time.Microsecond)
	t := a.capture()
	var done Attempt
	err := s.inTx(ctx, func(q *txQueries) error {
		c, err := q.RecordCapture(ctx, sqlc.RecordCaptureParams{
			ID: newID(), MerchantID: a.MerchantID, ChargeID: t.Of, Amount: t.Amount, Currency: t.Currency, Final: t.Final,
			ProviderCaptureID: providerCaptureID, Now: now,
		})
		if kind, constraint := db.Classify(err); kind == db.UniqueViolation && constraint == constraintProviderCaptureID {
			return errFenced // recorded already, by whoever finalized the attempt
		}
		if err != nil {
			return err
		}
		row, err := q.SucceedCaptureAttempt(ctx, sqlc.SucceedCaptureAttemptParams{CaptureID: c.ID, Now: now, ExpiresAt: expiresAt, ID: a.ID, Fence: a.Fence})
		if isNotFound(err) {
			return errFenced // rolls the capture back: the record's owner writes it
		}
		if err != nil {
			return err
		}
		done = attemptOf(attemptRow{ChargeAttempt: row, providerChargeID: &t.OfProvider})
		t.Capture = &Capture{ID: c.ID, ChargeID: t.Of, Amount: c.Amount, Currency: c.Currency, Final: c.Final,
			ProviderCaptureID: c.ProviderCaptureID, CreatedAt: c.CreatedAt}
		done.Terms = t
		return insertEvent(ctx, q, captureEventOf(done, now))
	})
	if errors.Is(err, errFenced) {
		return Attempt{}, errFenced
	}
	return done, interpretError(err)
}

// failCapture finalizes capture attempt a as FAILED and gives its
// reservation back, in one transaction fenced like succeedCapture.
func (s *store) failCapture(ctx context.Context, a Attempt, f Failure, now, expiresAt time.Time) (Attempt, error) {
	t := a.capture()
	return s.fail(ctx, a, f, now, expiresAt, func(q *txQueries, _ Attempt) error {
		return q.ReleaseCaptureReservation(ctx, sqlc.ReleaseCaptureReservationParams{Amount: t.Amount, Final: t.Final, ID: t.Of})
	})
}

// succeedVoid records that the provider voided the authorization, the
// attempt SUCCEEDED and charge.voided, in one transaction fenced on a's
// fence.
func (s *store) succeedVoid(ctx context.Context, a Attempt, providerVoidID string, now, expiresAt time.Time) (Attempt, error) {
	now = now.Truncate(time.Microsecond)
	t := a.void()
	var done Attempt
	err := s.inTx(ctx, func(q *txQueries) error {
		row, err := q.SucceedVoidAttempt(ctx, sqlc.SucceedVoidAttemptParams{Now: now, ExpiresAt: expiresAt, ID: a.ID, Fence: a.Fence})
		if isNotFound(err) {
			return errFenced
		}
		if err != nil {
			return err
		}
		if err := q.RecordVoid(ctx, sqlc.RecordVoidParams{Now: now, ID: t.Of}); err != nil {
			return err
		}
		done = attemptOf(attemptRow{ChargeAttempt: row, providerChargeID: &t.OfProvider})
		t.Void = &Void{ID: a.ID, ChargeID: t.Of, ProviderVoidID: providerVoidID, CreatedAt: now}
		done.Terms = t
		return insertEvent(ctx, q, voidEventOf(done, now))
	})
	if errors.Is(err, errFenced) {
		return Attempt{}, errFenced
	}
	return done, interpretError(err)
}

// failVoid finalizes void attempt a as FAILED and gives its claim on the
// charge back, in one transaction fenced like succeedVoid.
func (s *store) failVoid(ctx context.Context, a Attempt, f Failure, now, expiresAt time.Time) (Attempt, error) {
	of := a.void().Of
	return s.fail(ctx, a, f, now, expiresAt, func(q *txQueries, _ Attempt) error {
		return q.ReleaseVoid(ctx, of)
	})
}

// captureState is where the merchant's charge stands in its captures;
// ECHARGENOTFOUND when the merchant has no such charge.
func (s *store) captureState(ctx context.Context, merchantID, chargeID uuid.UUID) (CaptureState, error) {
	r, err := s.q.GetChargeCapture(ctx, sqlc.GetChargeCaptureParams{ID: chargeID, MerchantID: merchantID})
	if isNotFound(err) {
		return CaptureState{}, Errorf(ECHARGENOTFOUND, "no charge of this merchant has this id")
	}
	if err != nil {
		return CaptureState{}, interpretError(err)
	}
	st := CaptureState{Method: CaptureMethod(r.CaptureMethod), Amount: r.Amount, Captured: r.AmountCaptured}
	if st.Method != CaptureManual {
		st.Status, st.Captured = CaptureCaptured, r.Amount
		return st, nil
	}
	switch {
	case r.VoidedAt != nil:
		st.Status = CaptureVoided
	case r.AuthorizationExpiredAt != nil:
		st.Status = CaptureExpired
	case r.FinalCaptured || r.AmountCaptured == r.Amount:
		st.Status = CaptureCaptured
	case r.AmountCaptured > 0:
		st.Status = CapturePartiallyCaptured
	default:
		st.Status = CaptureUncaptured
	}
	open := st.Status == CaptureUncaptured || st.Status == CapturePartiallyCaptured
	if open && !r.FinalCaptureClaimed && !r.VoidClaimed {
		st.Capturable = r.Amount - r.CaptureReserved
	}
	if open || st.Status == CaptureExpired {
		st.ExpiresAt = r.AuthorizationExpiresAt
	}
	return st, nil
}

// captures are the merchant's charge's captures, oldest first.
func (s *store) captures(ctx context.Context, merchantID, chargeID uuid.UUID) ([]Capture, error) {
	rows, err := s.q.ListChargeCaptures(ctx, sqlc.ListChargeCapturesParams{ChargeID: chargeID, MerchantID: merchantID})
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]Capture, len(rows))
	for i, c := range rows {
		out[i] = Capture{ID: c.ID, ChargeID: c.ChargeID, Amount: c.Amount, Currency: c.Currency, Final: c.Final,
			ProviderCaptureID: c.ProviderCaptureID, CreatedAt: c.CreatedAt}
	}
	return out, nil
}

// openAuthorizations lists up to limit open authorizations, oldest first.
func (s *store) openAuthorizations(ctx context.Context, limit int) ([]OpenAuthorization, error) {
	rows, err := s.q.ListOpenAuthorizations(ctx, int32(limit))
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]OpenAuthorization, len(rows))
	for i, r := range rows {
		out[i] = OpenAuthorization{ChargeID: r.ID, Merchant: r.MerchantName, Amount: r.Amount, Currency: r.Currency,
			OrderID: deref(r.OrderID), Captured: r.AmountCaptured, Reserved: r.CaptureReserved,
			ProviderChargeID: r.ProviderChargeID, CreatedAt: r.CreatedAt, ExpiresAt: deref(r.AuthorizationExpiresAt)}
	}
	return out, nil
}

// charge is the merchant's charge with id; ECHARGENOTFOUND when it has
// none.
func (s *store) charge(ctx context.Context, merchantID, id uuid.UUID) (Charge, error) {
	c, err := s.q.GetCharge(ctx, sqlc.GetChargeParams{ID: id, MerchantID: merchantID})
	if isNotFound(err) {
		return Charge{}, Errorf(ECHARGENOTFOUND, "no charge of this merchant has this id")
	}
	if err != nil {
		return Charge{}, interpretError(err)
	}
	return Charge{ID: c.ID, Amount: c.Amount, Currency: c.Currency, OrderID: deref(c.OrderID),
		ProviderChargeID: c.ProviderChargeID, CreatedAt: c.CreatedAt}, nil
}

// lapsingOf converts a charges row for the authorization watch.
func lapsingOf(c sqlc.Charge) lapsing {
	return lapsing{ID: c.ID, MerchantID: c.MerchantID, ProviderChargeID: c.ProviderChargeID, Amount: c.Amount,
		Captured: c.AmountCaptured, Currency: c.Currency, OrderID: deref(c.OrderID), ExpiresAt: deref(c.AuthorizationExpiresAt)}
}

// warnExpiring marks up to limit open authorizations that lapse before
// warnBefore as warned, and writes their charge.authorization_expiring, in
// one transaction; it returns how many.
func (s *store) warnExpiring(ctx context.Context, now, warnBefore time.Time, limit int) (int, error) {
	var n int
	err := s.inTx(ctx, func(q *txQueries) error {
		rows, err := q.TakeExpiringAuthorizations(ctx, sqlc.TakeExpiringAuthorizationsParams{Now: now, WarnBefore: warnBefore, MaxCharges: int32(limit)})
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := insertEvent(ctx, q, authorizationEventOfCharge(EventAuthorizationExpiring, lapsingOf(r), now)); err != nil {
				return err
			}
		}
		n = len(rows)
		return nil
	})
	return n, interpretError(err)
}

// dueExpired lists up to limit open authorizations past their expiry at
// now with no capture or void running.
func (s *store) dueExpired(ctx context.Context, now time.Time, limit int) ([]lapsing, error) {
	rows, err := s.q.DueExpiredAuthorizations(ctx, sqlc.DueExpiredAuthorizationsParams{Now: now, MaxCharges: int32(limit)})
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]lapsing, len(rows))
	for i, r := range rows {
		out[i] = lapsingOf(r)
	}
	return out, nil
}

// expire records that c's authorization lapsed, and writes
// charge.authorization_expired, in one transaction; expired is false when
// a capture or a void was claimed since c was read, or another instance
// recorded it first.
func (s *store) expire(ctx context.Context, c lapsing, now time.Time) (expired bool, err error) {
	err = s.inTx(ctx, func(q *txQueries) error {
		row, err := q.ExpireAuthorization(ctx, sqlc.ExpireAuthorizationParams{Now: now, ID: c.ID})
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		expired = true
		return insertEvent(ctx, q, authorizationEventOfCharge(EventAuthorizationExpired, lapsingOf(row), now))
	})
	return expired, interpretError(err)
}

// processingCaptures lists up to limit capture and void attempts still
// PROCESSING, oldest first.
func (s *store) processingCaptures(ctx context.Context, limit int) ([]ProcessingCapture, error) {
	rows, err := s.q.ListProcessingCaptures(ctx, int32(limit))
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]ProcessingCapture, len(rows))
	for i, r := range rows {
		out[i] = ProcessingCapture{Kind: Kind(r.Kind), Merchant: r.MerchantName, IdempotencyKey: r.IdempotencyKey,
			ProviderKey: providerKeyOf(r.ID, r.ProviderKey), ChargeID: deref(r.ChargeID), ProviderChargeID: r.ProviderChargeID, Amount: r.Amount,
			Currency: r.Currency, Final: deref(r.CaptureFinal), Holders: int(r.Fence), CreatedAt: r.CreatedAt,
			LockedUntil: r.LockedUntil, PendingSince: deref(r.PendingSince)}
	}
	return out, nil
}

// openAuthorization is the merchant's charge chargeID while its
// authorization is open with nothing running on it; open is false
// otherwise.
func (s *store) openAuthorization(ctx context.Context, merchantID, chargeID uuid.UUID) (_ lapsing, open bool, _ error) {
	r, err := s.q.GetOpenAuthorization(ctx, sqlc.GetOpenAuthorizationParams{ID: chargeID, MerchantID: merchantID})
	if isNotFound(err) {
		return lapsing{}, false, nil
	}
	if err != nil {
		return lapsing{}, false, interpretError(err)
	}
	return lapsingOf(r), true, nil
}
