package payment

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// darkProvider is the provider while it is dark: a
// charge sent meanwhile neither reaches it nor comes back, and a lookup
// finds nothing, as a provider that is still processing a send would
// answer.
type darkProvider struct {
	Provider
	dark atomic.Bool
}

func (p *darkProvider) CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error) {
	if p.dark.Load() {
		return ProviderCharge{}, ErrOutcomeUnknown
	}
	return p.Provider.CreateCharge(ctx, req)
}

func (p *darkProvider) FindCharges(ctx context.Context, req ProviderChargeRequest) ([]ProviderCharge, error) {
	if p.dark.Load() {
		return nil, nil
	}
	return p.Provider.FindCharges(ctx, req)
}

func TestLateCharge_CompletedAfterTheAttemptFailed_RefundedOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RedriveWindow: time.Minute})
	ctx := context.Background()
	dark := &darkProvider{Provider: b.provider}
	dark.dark.Store(true)
	instances := []*Service{NewService(b.pool, dark, b.svc.cfg), NewService(b.pool, dark, b.svc.cfg)}

	r, err := instances[0].ChargeCard(ctx, b.merchant, "late", visa(1999))
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)
	b.clock.Advance(time.Minute + time.Second)
	_, err = NewReconciler(instances[0], ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	failed, err := instances[0].ChargeStatus(ctx, b.merchant, "late")
	require.NoError(t, err)
	require.Equal(t, StatusFailed, failed.Status)
	require.Equal(t, FailureProviderUnavailable, failed.Failure.Code)

	// The send that was in flight completes at the provider after all.
	a, err := b.svc.store.get(ctx, b.merchant.ID, uuid.Nil, "late")
	require.NoError(t, err)
	pc, err := b.provider.CreateCharge(ctx, providerRequest(b.merchant, a))
	require.NoError(t, err)
	require.True(t, pc.Succeeded)
	dark.dark.Store(false)

	// Before the watch's first read nothing happens; then both instances'
	// reconcilers read at once, twice over.
	_, err = NewReconciler(instances[1], ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, b.events(t, "late", EventChargeLateRefunded), "the first read is 5 minutes after the failure")
	b.clock.Advance(lateChargeFirstCheck)
	reconcileAtOnce(t, instances, 2)
	late := &Charge{ProviderChargeID: pc.ID}
	n, sum := b.providerRefunds(t, late)
	require.Equal(t, 1, n, "refunded once")
	require.Equal(t, int64(1999), sum, "refunded whole")
	require.Equal(t, 1, b.events(t, "late", EventChargeLateRefunded))
	require.Equal(t, 1, b.events(t, lateRefundKey(a), EventRefundSucceeded))
	require.InDelta(t, 1, testutil.ToFloat64(instances[0].metrics.LateCharges), 0, "counted once (the instances share their metrics here)")
	still, err := instances[1].ChargeStatus(ctx, b.merchant, "late")
	require.NoError(t, err)
	require.Equal(t, StatusFailed, still.Status, "the shopper was told FAILED; the attempt stays so")

	// A restart, and the rest of the watch: nothing more.
	restarted := NewService(b.pool, b.provider, b.svc.cfg)
	for _, step := range []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour} {
		b.clock.Advance(step)
		_, err := NewReconciler(restarted, ReconcilerConfig{}).RunOnce(ctx)
		require.NoError(t, err)
	}
	n, _ = b.providerRefunds(t, late)
	require.Equal(t, 1, n)
}

func TestLateCharge_NoneFound_TheWatchEndsAfterItsWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RedriveWindow: time.Minute, LateChargeWatch: 2 * time.Hour})
	ctx := context.Background()
	dark := &darkProvider{Provider: b.provider}
	dark.dark.Store(true)
	svc := NewService(b.pool, dark, b.svc.cfg)
	_, err := svc.ChargeCard(ctx, b.merchant, "never", visa(1999))
	require.NoError(t, err)
	b.clock.Advance(time.Minute + time.Second)
	_, err = NewReconciler(svc, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	dark.dark.Store(false) // it reads the real provider, which holds nothing

	watched := func() int {
		return countOf(t, b, `SELECT count(*) FROM charge_attempts WHERE idempotency_key = 'never' AND late_check_at IS NOT NULL`)
	}
	require.Equal(t, 1, watched())
	for _, step := range []time.Duration{5 * time.Minute, time.Hour, time.Hour} {
		b.clock.Advance(step)
		_, err := NewReconciler(svc, ReconcilerConfig{}).RunOnce(ctx)
		require.NoError(t, err)
	}
	require.Zero(t, watched(), "the watch ended at its end")
	require.Zero(t, b.events(t, "never", EventChargeLateRefunded))
	var expires time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT expires_at FROM charge_attempts WHERE idempotency_key = 'never'`).Scan(&expires))
	require.False(t, expires.Before(b.clock.Now().Add(-time.Minute)), "the result was kept for the whole watch")
}

func TestLateAuthorization_CompletedAfterTheAttemptFailed_VoidedNotRefunded(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RedriveWindow: time.Minute})
	ctx := context.Background()
	dark := &darkProvider{Provider: b.provider}
	dark.dark.Store(true)
	svc := NewService(b.pool, dark, b.svc.cfg)
	in := visa(1999)
	in.CaptureMethod = CaptureManual
	_, err := svc.ChargeCard(ctx, b.merchant, "late-auth", in)
	require.NoError(t, err)
	b.clock.Advance(time.Minute + time.Second)
	_, err = NewReconciler(svc, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)

	// The authorization that was in flight completes at the provider.
	a, err := b.svc.store.get(ctx, b.merchant.ID, uuid.Nil, "late-auth")
	require.NoError(t, err)
	require.Equal(t, StatusFailed, a.Status)
	pc, err := b.provider.CreateCharge(ctx, providerRequest(b.merchant, a))
	require.NoError(t, err)
	require.NotNil(t, pc.Authorization, "the provider holds an authorization, not money")
	dark.dark.Store(false)

	b.clock.Advance(lateChargeFirstCheck)
	reconcileAtOnce(t, []*Service{svc, NewService(b.pool, b.provider, b.svc.cfg)}, 2)
	require.Len(t, b.provider.Voids(pc.ID), 1, "voided once")
	n, _ := b.providerRefunds(t, &Charge{ProviderChargeID: pc.ID})
	require.Zero(t, n, "an authorization took no money: nothing is refunded")
	require.Equal(t, 1, b.events(t, "late-auth", EventChargeLateVoided))
	require.Equal(t, 1, b.events(t, lateRefundKey(a), EventChargeVoided))
	authorization, err := b.provider.ReadAuthorization(ctx, pc.ID)
	require.NoError(t, err)
	require.Equal(t, AuthorizationVoided, authorization.State)
}
