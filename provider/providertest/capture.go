package providertest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/payment"
)

// The cases of authorize now, capture later: a charge made with
// payment.CaptureManual, its captures, its void, and its expiry. They run
// only for a harness with Captures set.

// CaptureRequest is the request of a fresh capture attempt of amount of the
// authorization chargeID, as payment makes it: our provider key, the
// attempt, and the metadata that names them.
func CaptureRequest(chargeID string, amount int64, currency string, final bool) payment.ProviderCaptureRequest {
	id := uuid.New()
	return payment.ProviderCaptureRequest{
		IdempotencyKey:   "chargeonce_" + id.String(),
		AttemptID:        id,
		AttemptCreatedAt: time.Now(),
		ProviderChargeID: chargeID,
		Amount:           amount,
		Currency:         currency,
		Final:            final,
		Metadata: map[string]string{
			"chargeonce_attempt_id": id.String(), "chargeonce_kind": "capture",
			"client_idempotency_key": "capture-" + id.String()[:8], "merchant": "demo",
		},
	}
}

// VoidRequest is the request of a fresh void attempt of the authorization
// chargeID, as payment makes it.
func VoidRequest(chargeID string) payment.ProviderVoidRequest {
	id := uuid.New()
	return payment.ProviderVoidRequest{
		IdempotencyKey:   "chargeonce_" + id.String(),
		AttemptID:        id,
		AttemptCreatedAt: time.Now(),
		ProviderChargeID: chargeID,
		Metadata: map[string]string{
			"chargeonce_attempt_id": id.String(), "chargeonce_kind": "void",
			"client_idempotency_key": "void-" + id.String()[:8], "merchant": "demo",
		},
	}
}

// checkCaptures refuses a harness that puts captures under test but
// neither offers a capture behaviour nor says why not, or does both.
func (h Harness) checkCaptures(t *testing.T) {
	t.Helper()
	if !h.Captures {
		return
	}
	require.True(t, (h.ExpireAuthorization != nil) != (h.Cannot.ExpireAuthorization != ""),
		"providertest: Harness.ExpireAuthorization must be set, or else a reason given in Cannot, not both")
	require.True(t, (h.LoseCaptureOutcome != nil) != (h.Cannot.LoseCaptureOutcome != ""),
		"providertest: Harness.LoseCaptureOutcome must be set, or else a reason given in Cannot, not both")
}

// skipUnlessCaptures skips a capture case unless the harness puts captures
// under test, and then as skipUnless.
func skipUnlessCaptures(t *testing.T, h Harness, reason string) {
	t.Helper()
	if !h.Captures {
		t.Skip("Harness.Captures is unset: the provider's authorizations, captures and voids are not under test")
	}
	skipUnless(t, reason)
}

// ManualRequest is the charge request of a fresh attempt that only
// authorizes (payment.CaptureManual).
func ManualRequest(paymentMethod string, amount int64, currency string) payment.ProviderChargeRequest {
	req := Request(paymentMethod, amount, currency)
	req.CaptureMethod = payment.CaptureManual
	return req
}

// authorize makes req, a manual charge, and requires an open authorization
// of its amount with nothing captured.
func (h Harness) authorize(t *testing.T, req payment.ProviderChargeRequest) payment.ProviderCharge {
	t.Helper()
	pc, err := h.Provider.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.True(t, pc.Succeeded, "an authorization is a succeeded charge: %+v", pc)
	require.NotEmpty(t, pc.ID)
	require.NotNil(t, pc.Authorization, "a manual charge is an authorization: %+v", pc)
	require.Equal(t, payment.AuthorizationOpen, pc.Authorization.State)
	require.Equal(t, req.Amount, pc.Authorization.Amount)
	require.Zero(t, pc.Authorization.Captured)
	return pc
}

// authorized authorizes amount (USD) on the succeeding card.
func (h Harness) authorized(t *testing.T, amount int64) payment.ProviderCharge {
	t.Helper()
	return h.authorize(t, ManualRequest(h.SucceedingCard, amount, "USD"))
}

// capture sends req and requires that it succeeds.
func (h Harness) capture(t *testing.T, req payment.ProviderCaptureRequest) payment.ProviderCapture {
	t.Helper()
	pc, err := h.Provider.CaptureCharge(t.Context(), req)
	require.NoError(t, err)
	require.True(t, pc.Succeeded, "%+v", pc)
	require.NotEmpty(t, pc.ID)
	require.Empty(t, pc.FailureCode)
	return pc
}

// refusedCapture sends req and requires that the provider refuses it with
// code, as an answer, not an error.
func (h Harness) refusedCapture(t *testing.T, req payment.ProviderCaptureRequest, code string) {
	t.Helper()
	pc, err := h.Provider.CaptureCharge(t.Context(), req)
	require.NoError(t, err, "a refusal is an answer")
	require.False(t, pc.Succeeded, "%+v", pc)
	require.Equal(t, code, pc.FailureCode, "%+v", pc)
	require.NotEmpty(t, pc.FailureMessage)
}

// void sends req and requires that it succeeds.
func (h Harness) void(t *testing.T, req payment.ProviderVoidRequest) payment.ProviderVoid {
	t.Helper()
	pv, err := h.Provider.VoidCharge(t.Context(), req)
	require.NoError(t, err)
	require.True(t, pv.Succeeded, "%+v", pv)
	require.NotEmpty(t, pv.ID)
	require.Empty(t, pv.FailureCode)
	return pv
}

// refusedVoid sends req and requires that the provider refuses it with code.
func (h Harness) refusedVoid(t *testing.T, req payment.ProviderVoidRequest, code string) {
	t.Helper()
	pv, err := h.Provider.VoidCharge(t.Context(), req)
	require.NoError(t, err, "a refusal is an answer")
	require.False(t, pv.Succeeded, "%+v", pv)
	require.Equal(t, code, pv.FailureCode, "%+v", pv)
	require.NotEmpty(t, pv.FailureMessage)
}

// requireAuthorization reads the authorization chargeID and requires its
// state and what it captured.
func (h Harness) requireAuthorization(t *testing.T, chargeID string, state payment.AuthorizationState, amount, captured int64) payment.ProviderAuthorization {
	t.Helper()
	pa, err := h.Provider.ReadAuthorization(t.Context(), chargeID)
	require.NoError(t, err)
	require.Equal(t, state, pa.State, "%+v", pa)
	require.Equal(t, amount, pa.Amount, "authorized")
	require.Equal(t, captured, pa.Captured, "captured")
	return pa
}

var captureCases = []struct {
	name string
	run  func(t *testing.T, h Harness)
}{
	{"CreateCharge_Manual_IsAnOpenAuthorizationOfTheAmount", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, "")
		req := ManualRequest(h.SucceedingCard, 1000, "USD")
		pc := h.authorize(t, req)
		require.True(t, pc.Authorization.ExpiresAt.After(time.Now()), "it lapses later, not now: %v", pc.Authorization.ExpiresAt)
		pa := h.requireAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 0)
		require.True(t, pa.ExpiresAt.Equal(pc.Authorization.ExpiresAt), "read: %v, charged: %v", pa.ExpiresAt, pc.Authorization.ExpiresAt)
		if h.Cannot.FindAfterCharge != "" {
			return
		}
		found, err := h.Provider.FindCharges(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, []payment.ProviderCharge{pc}, found, "found as it was made: an authorization")
	}},
	{"CreateCharge_Automatic_HasNoAuthorization_AndIsNotCapturable", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, "")
		req, pc := h.charge(t)
		require.Nil(t, pc.Authorization, "an automatic charge took the money: %+v", pc)
		h.refusedCapture(t, CaptureRequest(pc.ID, req.Amount, req.Currency, true), payment.FailureChargeNotCapturable)
	}},
	{"CaptureCharge_InFull_CapturesTheAuthorization", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, "")
		pc := h.authorized(t, 1000)
		h.capture(t, CaptureRequest(pc.ID, 1000, "USD", true))
		h.requireAuthorization(t, pc.ID, payment.AuthorizationCaptured, 1000, 1000)
	}},
	{"CaptureCharge_PartThenFinal_CapturesBoth_AndNothingMore", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, "")
		pc := h.authorized(t, 1000)
		first := h.capture(t, CaptureRequest(pc.ID, 400, "USD", false))
		h.requireAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 400)
		final := h.capture(t, CaptureRequest(pc.ID, 300, "USD", true))
		require.NotEqual(t, first.ID, final.ID, "two captures")
		h.requireAuthorization(t, pc.ID, payment.AuthorizationCaptured, 1000, 700)
		// The final capture released the other 300.
		h.refusedCapture(t, CaptureRequest(pc.ID, 100, "USD", true), payment.FailureChargeNotCapturable)
		h.requireAuthorization(t, pc.ID, payment.AuthorizationCaptured, 1000, 700)
	}},
	{"CaptureCharge_SameProviderKeyTwice_IsOneCapture", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, h.Cannot.Deduplicate)
		pc := h.authorized(t, 1000)
		req := CaptureRequest(pc.ID, 400, "USD", false)
		first := h.capture(t, req)
		again, err := h.Provider.CaptureCharge(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, first, again, "the same key gets the same capture")
		h.requireAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 400)
	}},
	{"CaptureCharge_TwoKeysOverTheAuthorization_RefusesTheSecond", func(t *testing.T, h Harness) {
		// The provider's own guard: two capture attempts that each fit the
		// authorization, but not together.
		skipUnlessCaptures(t, h, "")
		pc := h.authorized(t, 1000)
		h.capture(t, CaptureRequest(pc.ID, 600, "USD", false))
		h.refusedCapture(t, CaptureRequest(pc.ID, 600, "USD", false), payment.FailureCaptureExceedsAuthorization)
		h.requireAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 600)
	}},
	{"FindCapture_BeforeTheCapture_IsNil_AfterIt_IsTheCapture", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, "")
		pc := h.authorized(t, 1000)
		req := CaptureRequest(pc.ID, 1000, "USD", true)
		found, err := h.Provider.FindCapture(t.Context(), req)
		require.NoError(t, err)
		require.Nil(t, found, "the provider holds no capture for a request never sent")
		h.requireAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 0) // FindCapture never sends
		capture := h.capture(t, req)
		found, err = h.Provider.FindCapture(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, &capture, found)
	}},
	{"VoidCharge_Open_VoidsIt_AndACaptureIsRefused", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, "")
		pc := h.authorized(t, 1000)
		h.void(t, VoidRequest(pc.ID))
		h.requireAuthorization(t, pc.ID, payment.AuthorizationVoided, 1000, 0)
		h.refusedCapture(t, CaptureRequest(pc.ID, 1000, "USD", true), payment.FailureChargeVoided)
		h.requireAuthorization(t, pc.ID, payment.AuthorizationVoided, 1000, 0)
	}},
	{"VoidCharge_AfterACapture_IsRefusedChargeCaptured", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, "")
		pc := h.authorized(t, 1000)
		h.capture(t, CaptureRequest(pc.ID, 400, "USD", false))
		h.refusedVoid(t, VoidRequest(pc.ID), payment.FailureChargeCaptured)
		h.requireAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 400)
	}},
	{"FindVoid_BeforeTheVoid_IsNil_AfterIt_IsTheVoid", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, "")
		pc := h.authorized(t, 1000)
		req := VoidRequest(pc.ID)
		found, err := h.Provider.FindVoid(t.Context(), req)
		require.NoError(t, err)
		require.Nil(t, found, "the provider holds no void for a request never sent")
		h.requireAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 0) // FindVoid never sends
		void := h.void(t, req)
		found, err = h.Provider.FindVoid(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, &void, found)
	}},
	{"VoidCharge_SameProviderKeyTwice_IsOneVoid", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, h.Cannot.Deduplicate)
		pc := h.authorized(t, 1000)
		req := VoidRequest(pc.ID)
		first := h.void(t, req)
		again, err := h.Provider.VoidCharge(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, first, again, "the same key gets the same void")
	}},
	{"ReadAuthorization_AfterItLapsed_IsExpired_AndCaptureAndVoidAreRefused", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, h.Cannot.ExpireAuthorization)
		pc := h.authorized(t, 1000)
		h.ExpireAuthorization(t, pc)
		h.requireAuthorization(t, pc.ID, payment.AuthorizationExpired, 1000, 0)
		h.refusedCapture(t, CaptureRequest(pc.ID, 1000, "USD", true), payment.FailureAuthorizationExpired)
		h.refusedVoid(t, VoidRequest(pc.ID), payment.FailureAuthorizationExpired)
		h.requireAuthorization(t, pc.ID, payment.AuthorizationExpired, 1000, 0)
	}},
	{"CaptureCharge_LostAnswer_IsOutcomeUnknown_AndReadsBackOneCapture", func(t *testing.T, h Harness) {
		skipUnlessCaptures(t, h, h.Cannot.LoseCaptureOutcome)
		ctx := t.Context()
		pc := h.authorize(t, h.LoseCaptureOutcome(t))
		req := CaptureRequest(pc.ID, pc.Authorization.Amount, "USD", true)
		_, err := h.Provider.CaptureCharge(ctx, req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		found, err := h.Provider.FindCapture(ctx, req)
		require.NoError(t, err)
		require.NotNil(t, found, "the capture was made: read back by its key or attempt")
		require.True(t, found.Succeeded, "%+v", found)
		// A resend under the same key is the same capture, whether its
		// answer arrives this time or is lost again.
		again, err := h.Provider.CaptureCharge(ctx, req)
		if err != nil {
			require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		} else {
			require.Equal(t, *found, again, "the same key, the same capture")
		}
		foundAgain, err := h.Provider.FindCapture(ctx, req)
		require.NoError(t, err)
		require.Equal(t, found, foundAgain, "one capture")
		h.requireAuthorization(t, pc.ID, payment.AuthorizationCaptured, pc.Authorization.Amount, pc.Authorization.Amount)
	}},
}
