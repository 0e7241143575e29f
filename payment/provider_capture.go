package payment

import (
	"time"

	"github.com/google/uuid"
)

// Authorize now, capture later: what a provider is asked for and answers
// about a charge made with CaptureManual, its captures and its void.

// CaptureMethod says when a charge's money is taken: at once (automatic,
// the default), or later by captures of the authorization (manual).
type CaptureMethod string

const (
	// CaptureAutomatic takes the money with the charge.
	CaptureAutomatic CaptureMethod = "automatic"
	// CaptureManual only authorizes the charge: the provider holds the
	// money until it is captured (in full or in parts), voided, or the
	// authorization expires.
	CaptureManual CaptureMethod = "manual"
)

// Failure codes of captures and voids, which the adapters map their
// provider's answers to.
const (
	// FailureAuthorizationExpired: the authorization lapsed before the
	// capture; nothing was captured.
	FailureAuthorizationExpired = "authorization_expired"
	// FailureCaptureExceedsAuthorization: the provider refused a capture of
	// more than remains capturable.
	FailureCaptureExceedsAuthorization = "capture_exceeds_authorization"
	// FailureChargeNotCapturable: the charge is captured in full, its final
	// capture is done, or it was never an authorization.
	FailureChargeNotCapturable = "charge_not_capturable"
	// FailureChargeVoided: the authorization was voided.
	FailureChargeVoided = "charge_voided"
	// FailureChargeCaptured: a void of an authorization that has a capture.
	FailureChargeCaptured = "charge_captured"
)

// ProviderAuthorization is where an authorization (a succeeded charge made
// with CaptureManual) stands at the provider.
type ProviderAuthorization struct {
	State AuthorizationState
	// Amount is what was authorized, Captured what its captures took so
	// far, both in minor units.
	Amount   int64
	Captured int64
	// ExpiresAt is when the authorization lapses unless captured in full
	// or voided before; zero when the provider does not say.
	ExpiresAt time.Time
}

// AuthorizationState is where an authorization stands.
type AuthorizationState string

const (
	// AuthorizationOpen: capturable (Amount - Captured of it), not final.
	AuthorizationOpen AuthorizationState = "open"
	// AuthorizationCaptured: captured in full, or its final capture done:
	// nothing more is capturable, the rest was released.
	AuthorizationCaptured AuthorizationState = "captured"
	// AuthorizationVoided: voided; nothing was captured.
	AuthorizationVoided AuthorizationState = "voided"
	// AuthorizationExpired: it lapsed; what was not captured was released.
	AuthorizationExpired AuthorizationState = "expired"
)

// ProviderCaptureRequest asks the provider to capture Amount of the
// authorization ProviderChargeID once per IdempotencyKey (our provider key
// of the capture attempt). With Final, the rest of the authorization is
// released by this capture; without, more captures may follow.
type ProviderCaptureRequest struct {
	IdempotencyKey string
	// AttemptID names the capture attempt whatever its provider key (it is
	// also in Metadata as chargeonce_attempt_id); AttemptCreatedAt: no
	// capture for it is older.
	AttemptID        uuid.UUID
	AttemptCreatedAt time.Time
	ProviderChargeID string
	Amount           int64
	Currency         string
	Final            bool
	Metadata         map[string]string
}

// ProviderVoidRequest asks the provider to void (cancel) the authorization
// ProviderChargeID once per IdempotencyKey (our provider key of the void
// attempt).
type ProviderVoidRequest struct {
	IdempotencyKey   string
	AttemptID        uuid.UUID
	AttemptCreatedAt time.Time
	ProviderChargeID string
	Metadata         map[string]string
}

// ProviderCapture is the provider's word on a capture: made (Succeeded),
// or refused with a failure code (FailureAuthorizationExpired,
// FailureChargeVoided, a decline…). A refused one captured nothing.
type ProviderCapture struct {
	ID             string
	Succeeded      bool
	FailureCode    string // set when refused
	FailureMessage string
}

// ProviderVoid is the provider's word on a void: made (Succeeded), or
// refused with a failure code (FailureChargeCaptured,
// FailureAuthorizationExpired…).
type ProviderVoid struct {
	ID             string
	Succeeded      bool
	FailureCode    string // set when refused
	FailureMessage string
}
