package apitest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/internal/apiclient"
)

// Manual is a card charge of amount that only authorizes (captureMethod
// MANUAL), for captures later.
func Manual(amount int) apiclient.ChargeCardInput {
	in := Visa(amount)
	in.CaptureMethod = new(apiclient.CaptureMethodManual)
	return in
}

// Authorize charges in (made MANUAL) under a new key and returns the
// authorized charge's id and the key.
func (s *Server) Authorize(t *testing.T, in apiclient.ChargeCardInput) (chargeID, key string) {
	t.Helper()
	in.CaptureMethod = new(apiclient.CaptureMethodManual)
	key = NewKey()
	res, err := s.API(apiclient.DemoAPIKey).ChargeCard(context.Background(), key, in)
	require.NoError(t, err)
	require.Equal(t, apiclient.Succeeded, res.Status, "the authorization succeeds")
	return res.Charge.Id, key
}

// CaptureInput is the input of a capture of amount (0: all that is
// capturable) of charge, final or not.
func CaptureInput(charge string, amount int, final bool) apiclient.CaptureInput {
	in := apiclient.CaptureInput{ChargeId: charge, Final: &final}
	if amount > 0 {
		in.Amount = &amount
	}
	return in
}

// Capture sends captureCharge under key, and fails t unless it answers.
func (s *Server) Capture(t *testing.T, key string, in apiclient.CaptureInput) *apiclient.CaptureResult {
	t.Helper()
	res, err := s.API(apiclient.DemoAPIKey).CaptureCharge(context.Background(), key, in)
	require.NoError(t, err)
	return res
}

// Void sends voidCharge of charge under key, and fails t unless it
// answers.
func (s *Server) Void(t *testing.T, key, charge string) *apiclient.VoidResult {
	t.Helper()
	res, err := s.API(apiclient.DemoAPIKey).VoidCharge(context.Background(), key, apiclient.VoidInput{ChargeId: charge})
	require.NoError(t, err)
	return res
}

// Refused is the extensions.code of err, an API error; "" for none.
func Refused(err error) string {
	var apiErr *apiclient.Error
	if errors.As(err, &apiErr) {
		return apiErr.Code()
	}
	return ""
}

// ProviderCaptured is what the simulated provider has captured of its
// charge providerChargeID, summed over its captures: the ground truth of
// how much money a charge's captures took.
func (s *Server) ProviderCaptured(t *testing.T, providerChargeID string) int {
	t.Helper()
	pc, err := s.API(apiclient.DemoAPIKey).ProviderChargeByID(context.Background(), providerChargeID)
	require.NoError(t, err)
	require.NotNil(t, pc, "the provider has the charge")
	return int(pc.AmountCaptured)
}
