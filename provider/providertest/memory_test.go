package providertest_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
)

// TestConformance_Memory runs the suite against the in-memory provider,
// with every behaviour offered.
func TestConformance_Memory(t *testing.T) {
	t.Parallel()
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		m := providertest.NewMemory(providertest.MemoryOptions{})
		return providertest.Harness{
			Provider:       m,
			SucceedingCard: providertest.CardVisa,
			DecliningCard:  providertest.CardDeclined,
			DeclineCode:    "card_declined",
			Charges: func(_ *testing.T, req payment.ProviderChargeRequest) int {
				return count(m.ChargeKeys(), req.IdempotencyKey)
			},
			// Charged, and the answer lost.
			LoseOutcome: func(*testing.T) payment.ProviderChargeRequest {
				return providertest.Request(providertest.CardLostResponse, 1999, "USD")
			},
			// The next new key's first send saves a 500, replayed after.
			SpendKey: func(*testing.T) payment.ProviderChargeRequest {
				m.SpendNextKeys(1)
				return providertest.Request(providertest.CardVisa, 1999, "USD")
			},
			AuthenticationCard: providertest.CardAuthenticationRequired,
			Authenticate: func(t *testing.T, pc payment.ProviderCharge) {
				_, err := m.PressChallenge(pc.Action.URL, "complete")
				require.NoError(t, err)
			},
			Refunds:  true,
			Captures: true,
			ExpireAuthorization: func(t *testing.T, pc payment.ProviderCharge) {
				require.NoError(t, m.Expire(pc.ID))
			},
			// Captured, and every answer lost.
			LoseCaptureOutcome: func(*testing.T) payment.ProviderChargeRequest {
				return providertest.ManualRequest(providertest.CardCaptureLostResponse, 1999, "USD")
			},
		}
	})
}

// count is how many times s holds v.
func count(s []string, v string) int {
	n := 0
	for i := range s {
		if s[i] == v {
			n++
		}
	}
	return n
}

// handClock is a clock that only the test moves: now reads it, advance
// moves it on.
func handClock() (now func() time.Time, advance func(time.Duration)) {
	var t atomic.Int64
	t.Store(time.Now().UnixNano())
	return func() time.Time { return time.Unix(0, t.Load()) }, func(d time.Duration) { t.Add(int64(d)) }
}

// authorized authorizes amount (USD) on card.
func authorized(t *testing.T, m *providertest.Memory, card string, amount int64) payment.ProviderCharge {
	t.Helper()
	pc, err := m.CreateCharge(t.Context(), providertest.ManualRequest(card, amount, "USD"))
	require.NoError(t, err)
	require.NotNil(t, pc.Authorization, "%+v", pc)
	return pc
}

func TestMemory_SameKeyConcurrently_OneCharge_EverySendTheSameAnswer(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	req := providertest.Request(providertest.CardVisa, 1999, "USD")
	answers := make([]payment.ProviderCharge, 50)
	errs := make([]error, 50)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i], errs[i] = m.CreateCharge(t.Context(), req) })
	}
	wg.Wait()
	for i := range answers {
		require.NoError(t, errs[i])
		require.Equal(t, answers[0], answers[i])
	}
	require.True(t, answers[0].Succeeded)
	require.Equal(t, []string{req.IdempotencyKey}, m.ChargeKeys(), "one charge")
	require.Len(t, m.KeysSent(), 50, "every send is seen")
}

func TestMemory_SameKeyOtherRequest_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	ctx := t.Context()
	req := providertest.Request(providertest.CardVisa, 1999, "USD")
	pc, err := m.CreateCharge(ctx, req)
	require.NoError(t, err)
	other := req
	other.Amount++
	_, err = m.CreateCharge(ctx, other)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "a conflict, as the simulator's 409")

	refund := providertest.RefundRequest(pc.ID, 500, "USD")
	_, err = m.CreateRefund(ctx, refund)
	require.NoError(t, err)
	refund.Amount++
	_, err = m.CreateRefund(ctx, refund)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)

	auth := authorized(t, m, providertest.CardVisa, 1000)
	capture := providertest.CaptureRequest(auth.ID, 400, "USD", false)
	_, err = m.CaptureCharge(ctx, capture)
	require.NoError(t, err)
	capture.Final = true
	_, err = m.CaptureCharge(ctx, capture)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	void := providertest.VoidRequest(auth.ID)
	void.Metadata = map[string]string{"other": "void"}
	_, err = m.VoidCharge(ctx, void)
	require.NoError(t, err, "refused (it has a capture), and nothing stored")
	void.ProviderChargeID = pc.ID
	pv, err := m.VoidCharge(ctx, void)
	require.NoError(t, err, "a refused void stores nothing: the key is free")
	require.Equal(t, payment.FailureChargeNotCapturable, pv.FailureCode)
}

func TestMemory_Cards_ChargeAsTheSimulatorDoes(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	ctx := t.Context()
	for _, tc := range []struct {
		card      string
		succeeded bool
		code      string
	}{
		{providertest.CardVisa, true, ""},
		{providertest.CardMastercard, true, ""},
		{providertest.CardRefundPending, true, ""},
		{providertest.CardRefundFailsLater, true, ""},
		{providertest.CardCaptureDeclined, true, ""},
		{providertest.CardCaptureLostResponse, true, ""},
		{providertest.CardCaptureSlow, true, ""},
		{providertest.CardDeclined, false, "card_declined"},
		{providertest.CardInsufficientFunds, false, "insufficient_funds"},
		{providertest.CardAuthenticationRequired, false, payment.FailureAuthenticationRequired},
	} {
		req := providertest.Request(tc.card, 1999, "USD")
		pc, err := m.CreateCharge(ctx, req)
		require.NoError(t, err, tc.card)
		require.Equal(t, tc.succeeded, pc.Succeeded, tc.card)
		require.Equal(t, tc.code, pc.FailureCode, tc.card)
		require.NotEmpty(t, pc.ID, "%s: stored", tc.card)
		require.Equal(t, map[bool]string{true: "succeeded", false: "failed"}[tc.succeeded], m.ChargeStatus(pc.ID), tc.card)
	}

	// Refused before anything is stored: an unknown card, and every send of
	// the card whose provider fails.
	pc, err := m.CreateCharge(ctx, providertest.Request("pm_card_declined", 1999, "USD"))
	require.NoError(t, err, "an unknown card is an answer")
	require.Equal(t, payment.ProviderCharge{FailureCode: "payment_method_unknown", FailureMessage: `No such payment method: "pm_card_declined".`}, pc)
	failing := providertest.Request(providertest.CardProviderError, 1999, "USD")
	for range 2 {
		_, err := m.CreateCharge(ctx, failing)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		require.NotErrorIs(t, err, payment.ErrProviderKeySpent)
	}
	found, err := m.FindCharges(ctx, failing)
	require.NoError(t, err)
	require.Empty(t, found, "nothing stored")
	require.Len(t, m.ChargeKeys(), 10, "the ten cards above, and nothing else")
}

func TestMemory_LostResponse_EverySendLosesItsAnswer_OneCharge(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	req := providertest.Request(providertest.CardLostResponse, 1999, "USD")
	for range 3 {
		_, err := m.CreateCharge(t.Context(), req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	}
	found, err := m.FindCharges(t.Context(), req)
	require.NoError(t, err)
	require.Len(t, found, 1, "charged once, under one key")
	require.True(t, found[0].Succeeded)
}

func TestMemory_Slow_AnswersAfterTheDelay_AndACallerThatStopsWaitingIsChargedAllTheSame(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{SlowDelay: 200 * time.Millisecond})
	start := time.Now()
	pc, err := m.CreateCharge(t.Context(), providertest.Request(providertest.CardSlow, 1999, "USD"))
	require.NoError(t, err)
	require.True(t, pc.Succeeded)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	req := providertest.Request(providertest.CardSlow, 1999, "USD")
	_, err = m.CreateCharge(ctx, req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "the caller does not know")
	found, err := m.FindCharges(t.Context(), req)
	require.NoError(t, err)
	require.Len(t, found, 1, "the provider charged")

	auth := authorized(t, m, providertest.CardCaptureSlow, 1000)
	start = time.Now()
	_, err = m.CaptureCharge(t.Context(), providertest.CaptureRequest(auth.ID, 1000, "USD", true))
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "a capture of the slow capture card")
}

func TestMemory_SpentKey_ReplaysItsFailure_TheNextKeyCharges(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	ctx := t.Context()
	req := providertest.Request(providertest.CardVisa, 1999, "USD")
	m.SpendNextKeys(1)
	_, err := m.CreateCharge(ctx, req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	_, err = m.CreateCharge(ctx, req)
	require.ErrorIs(t, err, payment.ErrProviderKeySpent)
	rekeyed := req
	rekeyed.IdempotencyKey += "_2"
	pc, err := m.CreateCharge(ctx, rekeyed)
	require.NoError(t, err, "one key spent, not the next")
	require.True(t, pc.Succeeded)
	require.Equal(t, []string{req.IdempotencyKey, req.IdempotencyKey, rekeyed.IdempotencyKey}, m.KeysSent())
	found, err := m.FindCharges(ctx, req)
	require.NoError(t, err)
	require.Equal(t, []payment.ProviderCharge{pc}, found, "the attempt's one charge, under its new key")
}

func TestMemory_Challenge_RacesTheCancel_ExactlyOneOutcome(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	ctx := t.Context()
	const returnURL = "https://shop.example/done?chargeonce_key=k"
	outcomes := map[string]int{}
	for range 100 {
		req := providertest.Request(providertest.CardAuthenticationRequired, 1999, "USD")
		req.ReturnURL = returnURL
		waiting, err := m.CreateCharge(ctx, req)
		require.NoError(t, err)
		var cancelled payment.ProviderCharge
		var pressErr, cancelErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, pressErr = m.PressChallenge(waiting.Action.URL, "complete") })
		wg.Go(func() { cancelled, cancelErr = m.CancelCharge(ctx, req, waiting.ID) })
		wg.Wait()
		require.NoError(t, pressErr)
		require.NoError(t, cancelErr)
		found, err := m.FindCharges(ctx, req)
		require.NoError(t, err)
		require.Equal(t, []payment.ProviderCharge{cancelled}, found, "the cancel answers how it ended")
		status := m.ChargeStatus(waiting.ID)
		require.Contains(t, []string{"succeeded", "canceled"}, status)
		outcomes[status]++

		// A later press changes nothing, and sends the shopper back all the same.
		back, err := m.PressChallenge(waiting.Action.URL, "fail")
		require.NoError(t, err)
		require.Equal(t, returnURL, back.String())
		require.Equal(t, status, m.ChargeStatus(waiting.ID))
	}
	t.Logf("outcomes: %v", outcomes)

	never, err := m.CreateCharge(ctx, providertest.Request(providertest.CardAuthenticationRequired, 1999, "USD"))
	require.NoError(t, err)
	_, err = m.PressChallenge(providertest.MemoryChallengeURL+never.ID, "complete")
	require.Error(t, err, "a charge that never waited has nowhere to send the shopper")
	_, err = m.PressChallenge(providertest.MemoryChallengeURL+"ch_nope", "complete")
	require.Error(t, err)
}

func TestMemory_ManualCharge_Authenticated_OpensItsAuthorizationThen(t *testing.T) {
	t.Parallel()
	now, advance := handClock()
	m := providertest.NewMemory(providertest.MemoryOptions{Now: now, AuthorizationWindow: time.Hour})
	req := providertest.ManualRequest(providertest.CardAuthenticationRequired, 1000, "USD")
	req.ReturnURL = "https://shop.example/done"
	waiting, err := m.CreateCharge(t.Context(), req)
	require.NoError(t, err)
	require.Nil(t, waiting.Authorization, "nothing is held while the shopper authenticates")
	advance(10 * time.Minute)
	_, err = m.PressChallenge(waiting.Action.URL, "complete")
	require.NoError(t, err)
	pa, err := m.ReadAuthorization(t.Context(), waiting.ID)
	require.NoError(t, err)
	require.Equal(t, payment.ProviderAuthorization{State: payment.AuthorizationOpen, Amount: 1000, ExpiresAt: now().Add(time.Hour)}, pa)
}
