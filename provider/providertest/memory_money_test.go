package providertest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
)

func TestMemory_RefundPending_SettlesByItsClock(t *testing.T) {
	t.Parallel()
	now, advance := handClock()
	m := providertest.NewMemory(providertest.MemoryOptions{Now: now, RefundSettle: time.Minute})
	ctx := t.Context()
	pc, err := m.CreateCharge(ctx, providertest.Request(providertest.CardRefundPending, 1000, "USD"))
	require.NoError(t, err)
	req := providertest.RefundRequest(pc.ID, 400, "USD")
	pr, err := m.CreateRefund(ctx, req)
	require.NoError(t, err)
	require.Equal(t, payment.RefundPending, pr.State)
	n, held := m.RefundsHeld(pc.ID)
	require.Equal(t, 1, n, "a pending refund holds its amount")
	require.Equal(t, int64(400), held)

	advance(time.Minute - time.Millisecond)
	found, err := m.FindRefund(ctx, req)
	require.NoError(t, err)
	require.Equal(t, payment.RefundPending, found.State, "not before its time")
	advance(time.Millisecond)
	found, err = m.FindRefund(ctx, req)
	require.NoError(t, err)
	require.Equal(t, &payment.ProviderRefund{ID: pr.ID, State: payment.RefundSucceeded}, found)
	again, err := m.CreateRefund(ctx, req)
	require.NoError(t, err)
	require.Equal(t, *found, again, "the same key: the refund as it is now")
}

func TestMemory_RefundFailsLater_GivesItsAmountBack_TheNextSucceedsAtOnce(t *testing.T) {
	t.Parallel()
	now, advance := handClock()
	m := providertest.NewMemory(providertest.MemoryOptions{Now: now})
	ctx := t.Context()
	pc, err := m.CreateCharge(ctx, providertest.Request(providertest.CardRefundFailsLater, 1000, "USD"))
	require.NoError(t, err)
	first, err := m.CreateRefund(ctx, providertest.RefundRequest(pc.ID, 0, "USD"))
	require.NoError(t, err)
	require.Equal(t, payment.RefundPending, first.State, "no amount: all of it")
	refused, err := m.CreateRefund(ctx, providertest.RefundRequest(pc.ID, 1, "USD"))
	require.NoError(t, err)
	require.Equal(t, "amount_too_large", refused.FailureCode, "the pending refund holds the whole charge")

	advance(providertest.MemoryRefundSettleDefault)
	n, _ := m.RefundsHeld(pc.ID)
	require.Zero(t, n, "failed: it holds nothing")
	second, err := m.CreateRefund(ctx, providertest.RefundRequest(pc.ID, 0, "USD"))
	require.NoError(t, err)
	require.Equal(t, payment.RefundSucceeded, second.State, "the card's later refunds succeed at once")
	n, held := m.RefundsHeld(pc.ID)
	require.Equal(t, 1, n)
	require.Equal(t, int64(1000), held, "the failed one's amount back")
}

func TestMemory_RefundOfAnAuthorization_IsOfWhatWasCaptured(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	ctx := t.Context()
	auth := authorized(t, m, providertest.CardVisa, 1000)
	pr, err := m.CreateRefund(ctx, providertest.RefundRequest(auth.ID, 0, "USD"))
	require.NoError(t, err)
	require.Equal(t, "charge_not_refundable", pr.FailureCode, "nothing captured, nothing to refund")
	_, err = m.CaptureCharge(ctx, providertest.CaptureRequest(auth.ID, 300, "USD", true))
	require.NoError(t, err)
	pr, err = m.CreateRefund(ctx, providertest.RefundRequest(auth.ID, 301, "USD"))
	require.NoError(t, err)
	require.Equal(t, "amount_too_large", pr.FailureCode)
	pr, err = m.CreateRefund(ctx, providertest.RefundRequest(auth.ID, 0, "USD"))
	require.NoError(t, err)
	require.Equal(t, payment.RefundSucceeded, pr.State)
	_, held := m.RefundsHeld(auth.ID)
	require.Equal(t, int64(300), held)
}

func TestMemory_Authorization_LapsesByItsClock(t *testing.T) {
	t.Parallel()
	now, advance := handClock()
	m := providertest.NewMemory(providertest.MemoryOptions{Now: now, AuthorizationWindow: time.Hour})
	ctx := t.Context()
	auth := authorized(t, m, providertest.CardVisa, 1000)
	require.Equal(t, now().Add(time.Hour), auth.Authorization.ExpiresAt)
	advance(time.Hour - time.Millisecond)
	pa, err := m.ReadAuthorization(ctx, auth.ID)
	require.NoError(t, err)
	require.Equal(t, payment.AuthorizationOpen, pa.State)
	advance(time.Millisecond)
	pa, err = m.ReadAuthorization(ctx, auth.ID)
	require.NoError(t, err)
	require.Equal(t, payment.AuthorizationExpired, pa.State, "read at its time: expired")
	cp, err := m.CaptureCharge(ctx, providertest.CaptureRequest(auth.ID, 1000, "USD", true))
	require.NoError(t, err)
	require.Equal(t, payment.FailureAuthorizationExpired, cp.FailureCode)
	require.Error(t, m.Expire(auth.ID), "no longer open")
}

func TestMemory_CaptureDeclined_IsStoredFailed_TheAuthorizationUntouched(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	ctx := t.Context()
	auth := authorized(t, m, providertest.CardCaptureDeclined, 1000)
	req := providertest.CaptureRequest(auth.ID, 1000, "USD", true)
	cp, err := m.CaptureCharge(ctx, req)
	require.NoError(t, err, "a decline is an answer")
	require.False(t, cp.Succeeded)
	require.Equal(t, "card_declined", cp.FailureCode)
	require.NotEmpty(t, cp.ID, "stored")
	found, err := m.FindCapture(ctx, req)
	require.NoError(t, err)
	require.Equal(t, &cp, found)
	require.Equal(t, []payment.ProviderCapture{cp}, m.Captures(auth.ID))
	pa, err := m.ReadAuthorization(ctx, auth.ID)
	require.NoError(t, err)
	require.Equal(t, payment.AuthorizationOpen, pa.State)
	require.Zero(t, pa.Captured)
}

func TestMemory_ConcurrentCapturesUnderManyKeys_NeverAboveTheAuthorization(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	auth := authorized(t, m, providertest.CardVisa, 1000)
	answers := make([]payment.ProviderCapture, 20)
	errs := make([]error, 20)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			answers[i], errs[i] = m.CaptureCharge(t.Context(), providertest.CaptureRequest(auth.ID, 600, "USD", false))
		})
	}
	wg.Wait()
	codes := map[string]int{}
	for i := range answers {
		require.NoError(t, errs[i])
		codes[answers[i].FailureCode]++
	}
	require.Equal(t, map[string]int{"": 1, payment.FailureCaptureExceedsAuthorization: 19}, codes)
	require.Len(t, m.Captures(auth.ID), 1, "refusals store nothing")
	pa, err := m.ReadAuthorization(t.Context(), auth.ID)
	require.NoError(t, err)
	require.Equal(t, int64(600), pa.Captured)
}

func TestMemory_CaptureRacesVoid_ExactlyOneWins(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	ctx := t.Context()
	wins := map[string]int{}
	for range 200 {
		auth := authorized(t, m, providertest.CardVisa, 1000)
		var cp payment.ProviderCapture
		var pv payment.ProviderVoid
		var captureErr, voidErr error
		var wg sync.WaitGroup
		wg.Go(func() { cp, captureErr = m.CaptureCharge(ctx, providertest.CaptureRequest(auth.ID, 400, "USD", false)) })
		wg.Go(func() { pv, voidErr = m.VoidCharge(ctx, providertest.VoidRequest(auth.ID)) })
		wg.Wait()
		require.NoError(t, captureErr)
		require.NoError(t, voidErr)
		require.NotEqual(t, cp.Succeeded, pv.Succeeded, "exactly one wins: %+v, %+v", cp, pv)
		pa, err := m.ReadAuthorization(ctx, auth.ID)
		require.NoError(t, err)
		if cp.Succeeded {
			require.Equal(t, payment.FailureChargeCaptured, pv.FailureCode)
			require.Equal(t, payment.ProviderAuthorization{State: payment.AuthorizationOpen, Amount: 1000, Captured: 400, ExpiresAt: pa.ExpiresAt}, pa)
			require.Empty(t, m.Voids(auth.ID))
			wins["capture"]++
		} else {
			require.Equal(t, payment.FailureChargeVoided, cp.FailureCode)
			require.Equal(t, payment.AuthorizationVoided, pa.State)
			require.Zero(t, pa.Captured)
			require.Empty(t, m.Captures(auth.ID))
			require.Len(t, m.Voids(auth.ID), 1)
			wins["void"]++
		}
	}
	t.Logf("wins of 200 races: %v", wins)
}

func TestMemory_Captures_AreFoundByTheAttempt_WhateverTheirKey(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	ctx := t.Context()
	auth := authorized(t, m, providertest.CardVisa, 1000)
	req := providertest.CaptureRequest(auth.ID, 1000, "USD", true)
	cp, err := m.CaptureCharge(ctx, req)
	require.NoError(t, err)
	rekeyed := req
	rekeyed.IdempotencyKey += "_2"
	found, err := m.FindCapture(ctx, rekeyed)
	require.NoError(t, err)
	require.Equal(t, &cp, found, "by the attempt, made under its earlier key")

	void := providertest.VoidRequest(auth.ID)
	pv, err := m.VoidCharge(ctx, void)
	require.NoError(t, err)
	require.Equal(t, payment.FailureChargeCaptured, pv.FailureCode)
	nothing, err := m.FindVoid(ctx, void)
	require.NoError(t, err)
	require.Nil(t, nothing, "a refused void stores nothing")
}

func TestMemory_Charges_SelectsByMetadata_OldestFirst(t *testing.T) {
	t.Parallel()
	m := providertest.NewMemory(providertest.MemoryOptions{})
	var made []payment.ProviderCharge
	for i := range 3 {
		req := providertest.Request(providertest.CardVisa, 1999, "USD")
		req.Metadata["order_id"] = fmt.Sprint("order-", i%2)
		pc, err := m.CreateCharge(t.Context(), req)
		require.NoError(t, err)
		made = append(made, pc)
	}
	require.Equal(t, made, m.Charges("", ""))
	require.Equal(t, []payment.ProviderCharge{made[0], made[2]}, m.Charges("order_id", "order-0"))
	require.Empty(t, m.Charges("order_id", "order-9"))
	require.Empty(t, m.Charges("nobody", ""), "a key no charge's metadata holds selects none")
}
