package payment

import (
	"context"
	"time"

	"github.com/google/uuid"

	"chargeonce/db"
	"chargeonce/sqlc"
)

// The store's checkout sessions: their creation, lookups, and expiry. Every
// row is converted to a CheckoutSession here.

// constraintSessionOrder is the one open session per order.
const constraintSessionOrder = "checkout_sessions_open_order_idx"

// createSession inserts sess, after expiring the sessions of its order that
// are past their expiry (so that they do not hold the order); inserted is
// false when the key was taken or the order is paid (nothing inserted). A
// second open session for the order is errOrderPaid.
func (s *store) createSession(ctx context.Context, sess CheckoutSession, now time.Time) (CheckoutSession, bool, error) {
	var created CheckoutSession
	inserted := false
	err := s.inTx(ctx, func(q *txQueries) error {
		if sess.Input.OrderID != "" {
			if _, err := expireSessionsTx(ctx, q, now, sess.MerchantID, sess.Input.OrderID, 10); err != nil {
				return err
			}
		}
		row, err := q.InsertCheckoutSession(ctx, sqlc.InsertCheckoutSessionParams{
			ID: sess.ID, MerchantID: sess.MerchantID, IdempotencyKey: sess.IdempotencyKey, Fingerprint: sess.fingerprint,
			ClientSecretHash: sess.secretHash, Amount: sess.Input.Amount, Currency: sess.Input.Currency,
			OrderID: optional(sess.Input.OrderID), Description: optional(sess.Input.Description), ReturnURL: optional(sess.Input.ReturnURL),
			CreatedAt: sess.CreatedAt, ExpiresAt: sess.ExpiresAt, CaptureMethod: optional(manual(sess.Input.CaptureMethod)),
		})
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		created, inserted = sessionFromRow(row), true
		return nil
	})
	if kind, constraint := db.Classify(err); kind == db.UniqueViolation && constraint == constraintSessionOrder {
		return CheckoutSession{}, false, errOrderPaid
	}
	return created, inserted, interpretError(err)
}

func (s *store) sessionByKey(ctx context.Context, merchantID uuid.UUID, key string) (CheckoutSession, error) {
	row, err := s.q.GetCheckoutSessionByKey(ctx, sqlc.GetCheckoutSessionByKeyParams{MerchantID: merchantID, IdempotencyKey: key})
	if err != nil {
		return CheckoutSession{}, interpretError(err)
	}
	return s.withSessionCharge(ctx, sessionFromRow(row))
}

func (s *store) session(ctx context.Context, merchantID, id uuid.UUID) (CheckoutSession, error) {
	row, err := s.q.GetCheckoutSession(ctx, sqlc.GetCheckoutSessionParams{MerchantID: merchantID, ID: id})
	if err != nil {
		return CheckoutSession{}, interpretError(err)
	}
	return s.withSessionCharge(ctx, sessionFromRow(row))
}

// withSessionCharge attaches a paid session's charge.
func (s *store) withSessionCharge(ctx context.Context, sess CheckoutSession) (CheckoutSession, error) {
	if sess.chargeID == nil {
		return sess, nil
	}
	c, err := s.q.GetCheckoutSessionCharge(ctx, *sess.chargeID)
	if err != nil {
		return CheckoutSession{}, interpretError(err)
	}
	sess.Charge = &Charge{ID: c.ID, Amount: c.Amount, Currency: c.Currency, OrderID: deref(c.OrderID),
		ProviderChargeID: c.ProviderChargeID, CreatedAt: c.CreatedAt}
	return sess, nil
}

func (s *store) sessionHasLiveAttempt(ctx context.Context, id uuid.UUID) (bool, error) {
	live, err := s.q.SessionHasLiveAttempt(ctx, &id)
	return live, interpretError(err)
}

// expireSessions expires up to limit open sessions past their expiry at now
// (only merchantID's orderID, when given) with their events, in one
// transaction.
func (s *store) expireSessions(ctx context.Context, now time.Time, merchantID uuid.UUID, orderID string, limit int) (int, error) {
	var n int
	err := s.inTx(ctx, func(q *txQueries) error {
		var err error
		n, err = expireSessionsTx(ctx, q, now, merchantID, orderID, limit)
		return err
	})
	return n, interpretError(err)
}

func expireSessionsTx(ctx context.Context, q *txQueries, now time.Time, merchantID uuid.UUID, orderID string, limit int) (int, error) {
	p := sqlc.ExpireCheckoutSessionsParams{Now: now, MaxSessions: int32(limit)}
	if orderID != "" {
		p.MerchantID, p.OrderID = &merchantID, &orderID
	}
	rows, err := q.ExpireCheckoutSessions(ctx, p)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		if err := insertEvent(ctx, q, sessionEventOf(EventSessionExpired, sessionFromRow(r), nil, now)); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// sessionFromRow converts a checkout_sessions row; its charge, when it has
// one, is attached by withSessionCharge.
func sessionFromRow(r sqlc.CheckoutSession) CheckoutSession {
	return CheckoutSession{
		ID: r.ID, MerchantID: r.MerchantID, IdempotencyKey: r.IdempotencyKey,
		Input: SessionInput{
			Amount: r.Amount, Currency: r.Currency, OrderID: deref(r.OrderID), Description: deref(r.Description),
			ReturnURL: deref(r.ReturnURL), ExpiresIn: r.ExpiresAt.Sub(r.CreatedAt).Round(time.Second),
			CaptureMethod: CaptureMethod(deref(r.CaptureMethod)),
		},
		Status: SessionStatus(r.Status), Attempts: int(r.Attempts), CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		fingerprint: r.Fingerprint, secretHash: r.ClientSecretHash, chargeID: r.ChargeID,
	}
}
