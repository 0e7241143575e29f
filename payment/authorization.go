package payment

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Authorizations: where a manual charge stands in its captures, and what
// operators see of the open ones.

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
