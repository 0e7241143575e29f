package payment

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
)

// Authorizations: where a manual charge stands in its captures, what
// operators see of the open ones, and the watch of their expiry. An
// authorization lapses at the provider (7 days, say), and nothing must
// ship unpaid because nobody noticed: AuthorizationExpiryWarning before
// it lapses, charge.authorization_expiring is written once; once it has
// lapsed, with no capture or void running, the provider is read, and
// only when it says the authorization expired is the charge EXPIRED and
// charge.authorization_expired written. A capture claimed meanwhile wins:
// the expiry is recorded only while none runs (ExpireAuthorization), and
// a capture is refused once it is recorded, so the two never both happen.

// CaptureStatus is where a charge stands in its captures.
type CaptureStatus string

const (
	// CaptureUncaptured: authorized, nothing captured yet.
	CaptureUncaptured CaptureStatus = "UNCAPTURED"
	// CapturePartiallyCaptured: part captured, more may be.
	CapturePartiallyCaptured CaptureStatus = "PARTIALLY_CAPTURED"
	// CaptureCaptured: captured in full, or its final capture made (the
	// rest released); an automatic charge always is.
	CaptureCaptured CaptureStatus = "CAPTURED"
	// CaptureVoided: the authorization was voided; nothing was taken.
	CaptureVoided CaptureStatus = "VOIDED"
	// CaptureExpired: the authorization lapsed; what was not captured was
	// released.
	CaptureExpired CaptureStatus = "EXPIRED"
)

// CaptureState is where a charge stands in its captures: its method and
// status, the amount authorized (Amount), Captured of it, Capturable now
// (nothing while a final capture or a void runs), and ExpiresAt, when an
// open authorization lapses (nil once captured in full or voided).
type CaptureState struct {
	Method     CaptureMethod
	Status     CaptureStatus
	Amount     int64
	Captured   int64
	Capturable int64
	ExpiresAt  *time.Time
}

// CaptureState is where the merchant's charge chargeID stands in its
// captures; ECHARGENOTFOUND for a charge it does not have.
func (s *Service) CaptureState(ctx context.Context, m Merchant, chargeID uuid.UUID) (CaptureState, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	return s.store.captureState(ctx, m.ID, chargeID)
}

// Captures lists the captures of the merchant's charge, oldest first.
func (s *Service) Captures(ctx context.Context, m Merchant, chargeID uuid.UUID) ([]Capture, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	return s.store.captures(ctx, m.ID, chargeID)
}

// OpenAuthorization is what operators see of an authorization still open:
// neither captured in full nor finally, voided or expired.
type OpenAuthorization struct {
	ChargeID         uuid.UUID
	Merchant         string
	Amount           int64
	Currency         string
	OrderID          string
	Captured         int64 // taken by its captures so far
	Reserved         int64 // captured, and being captured
	ProviderChargeID string
	CreatedAt        time.Time
	ExpiresAt        time.Time
}

// OpenAuthorizations lists up to limit open authorizations, oldest first.
func (s *Service) OpenAuthorizations(ctx context.Context, limit int) ([]OpenAuthorization, error) {
	return s.store.openAuthorizations(ctx, limit)
}

// Charge is the merchant's charge with id, as it is now; ECHARGENOTFOUND
// when it has none.
func (s *Service) Charge(ctx context.Context, m Merchant, id uuid.UUID) (Charge, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	return s.store.charge(ctx, m.ID, id)
}

// watchAuthorizations is the watch's pass, in the reconciler's: up to
// limit warnings of authorizations about to lapse, then up to limit
// authorizations past their expiry read at the provider.
func (s *Service) watchAuthorizations(ctx context.Context, log *slog.Logger, limit int) {
	now := s.cfg.Now()
	warned, err := s.store.warnExpiring(ctx, now, now.Add(s.cfg.AuthorizationExpiryWarning), limit)
	if err != nil {
		log.WarnContext(ctx, "authorization watch: the warnings failed; the next pass tries again", "err", err)
	}
	if warned > 0 {
		s.metrics.Authorizations.WithLabelValues("expiring").Add(float64(warned))
	}
	due, err := s.store.dueExpired(ctx, now, limit)
	if err != nil {
		log.WarnContext(ctx, "authorization watch: could not list the lapsed authorizations; the next pass tries again", "err", err)
		return
	}
	for _, c := range due {
		l := log.With("charge_id", c.ID, "provider_charge_id", c.ProviderChargeID, "merchant_id", c.MerchantID)
		if err := s.expireIfLapsed(ctx, l, c); err != nil {
			l.WarnContext(ctx, "authorization watch: could not read the provider or record the expiry; the next pass tries again", "err", err)
		}
	}
}

// expireIfLapsed reads the provider about c's authorization and records it
// EXPIRED when the provider says it lapsed; otherwise (our clock and the
// provider's differ, or a running attempt's send captured or voided it
// there) it changes nothing, and that attempt records what it did.
func (s *Service) expireIfLapsed(ctx context.Context, log *slog.Logger, c lapsing) error {
	auth, err := s.provider.ReadAuthorization(ctx, c.ProviderChargeID)
	if err != nil || auth.State != AuthorizationExpired {
		return err
	}
	expired, err := s.store.expire(ctx, c, s.cfg.Now())
	if err == nil && expired {
		s.metrics.Authorizations.WithLabelValues("expired").Inc()
		log.WarnContext(ctx, "an authorization lapsed before it was captured in full; what was not captured is released",
			"amount", c.Amount, "captured", c.Captured)
	}
	return err
}

// recheckAuthorization reads the provider about the authorization of m's
// charge chargeID, because the provider said it changed (its webhook), and
// records its expiry; an authorization that is not open in the record is
// left as it is.
func (s *Service) recheckAuthorization(ctx context.Context, m Merchant, chargeID uuid.UUID) error {
	c, open, err := s.store.openAuthorization(ctx, m.ID, chargeID)
	if err != nil || !open {
		return err
	}
	return s.expireIfLapsed(ctx, s.log.With("charge_id", c.ID, "provider_charge_id", c.ProviderChargeID, "merchant_id", c.MerchantID), c)
}

// lapsing is an authorization the watch reads: its charge, and the amounts.
type lapsing struct {
	ID, MerchantID   uuid.UUID
	ProviderChargeID string
	Amount, Captured int64
	Currency         string
	OrderID          string
	ExpiresAt        time.Time
}

// authorizationEventOfCharge is the event of type about the authorization
// of charge c, occurring at now.
func authorizationEventOfCharge(eventType string, c lapsing, now time.Time) Event {
	return Event{ID: newID(), Type: eventType, OccurredAt: now.UTC(), MerchantID: c.MerchantID,
		Amount: c.Amount, Currency: c.Currency, OrderID: c.OrderID,
		Authorization: &EventAuthorization{ChargeID: c.ID, Amount: c.Amount, Captured: c.Captured, ExpiresAt: c.ExpiresAt.UTC()}}
}

// ProcessingCapture is what operators see of a capture or a void left
// PROCESSING: its holder works on it or died, its outcome is unknown (the
// reconciler settles it, under its one provider key), or it is only read
// since PendingSince.
type ProcessingCapture struct {
	Kind             Kind // KindCapture or KindVoid
	Merchant         string
	IdempotencyKey   string
	ProviderKey      string
	ChargeID         uuid.UUID
	ProviderChargeID string
	Amount           int64 // a capture's; a void's is the authorization's
	Currency         string
	Final            bool // a capture's
	Holders          int  // 1, and one more per takeover
	CreatedAt        time.Time
	LockedUntil      time.Time
	PendingSince     time.Time
}

// ProcessingCaptures lists up to limit captures and voids left
// PROCESSING, oldest first.
func (s *Service) ProcessingCaptures(ctx context.Context, limit int) ([]ProcessingCapture, error) {
	return s.store.processingCaptures(ctx, limit)
}
