package payment

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestDuplicateCharge_TheProviderChargedTwiceForOneAttempt_TheExtraRefundedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	// The charge is made, and its answer lost: the attempt stays PROCESSING.
	r, err := b.svc.ChargeCard(ctx, b.merchant, "twice", card("pm_card_lostResponse"))
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)
	// A stray send of the same attempt under another key charges again.
	a, err := b.svc.store.get(ctx, b.merchant.ID, uuid.Nil, "twice")
	require.NoError(t, err)
	stray := providerRequest(b.merchant, a)
	stray.IdempotencyKey = "stray_" + a.ProviderKey
	_, _ = b.provider.CreateCharge(ctx, stray) // its answer is lost too
	require.Equal(t, 2, b.providerCharges(t, "twice"), "the provider holds two charges for the attempt")

	// Two instances' reconcilers take it over at once, twice over, and
	// a restarted one passes again later.
	b.clock.AdvancePast(a.LockedUntil)
	instances := []*Service{b.svc, NewService(b.pool, b.provider, b.svc.cfg)}
	reconcileAtOnce(t, instances, 2)
	restarted := NewService(b.pool, b.provider, b.svc.cfg)
	b.clock.Advance(2 * time.Minute)
	_, err = NewReconciler(restarted, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)

	done := b.status(t, "twice")
	require.Equal(t, StatusSucceeded, done.Status, "the attempt's answer stands: the shopper paid")
	var dup Charge
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id, provider_charge_id FROM charges WHERE duplicate_of = $1`, a.ID).
		Scan(&dup.ID, &dup.ProviderChargeID))
	require.NotEqual(t, done.Charge.ProviderChargeID, dup.ProviderChargeID, "the attempt settled on one, the other is the duplicate")
	n, sum := b.providerRefunds(t, &dup)
	require.Equal(t, 1, n, "the duplicate refunded once")
	require.Equal(t, int64(1999), sum, "refunded whole")
	n, _ = b.providerRefunds(t, done.Charge)
	require.Zero(t, n, "the charge the attempt settled on is not refunded")
	require.Equal(t, int64(1999), b.refunded(t, &dup))
	require.Equal(t, 1, b.events(t, "twice", EventChargeDuplicateRefunded))
	require.Equal(t, 1, b.events(t, duplicateRefundKey(dup.ID), EventRefundSucceeded))
	require.InDelta(t, 1, testutil.ToFloat64(b.svc.metrics.DuplicateCharges), 0, "counted once (the instances share their metrics here)")
	require.Zero(t, countOf(t, b, `SELECT count(*) FROM charges WHERE refund_due_at IS NOT NULL`), "nothing left to claim")
}

func TestSettleOn_TheFirstSuccess_TheOtherSuccessesAreDuplicates(t *testing.T) {
	t.Parallel()
	ok := func(id string) ProviderCharge { return ProviderCharge{ID: id, Succeeded: true} }
	failed := func(id string) ProviderCharge { return ProviderCharge{ID: id, FailureCode: "card_declined"} }
	waits := func(id string) ProviderCharge {
		return ProviderCharge{ID: id, Action: &ProviderAction{URL: "https://bank.example/" + id}}
	}
	for _, tt := range []struct {
		name       string
		charges    []ProviderCharge // oldest first
		want       string           // "" for none
		duplicates []string
	}{
		{"none", nil, "", nil},
		{"one success", []ProviderCharge{ok("a")}, "a", nil},
		{"one failure", []ProviderCharge{failed("a")}, "a", nil},
		{"one that waits", []ProviderCharge{waits("a")}, "a", nil},
		{"two successes: the first, the second a duplicate", []ProviderCharge{ok("a"), ok("b")}, "a", []string{"b"}},
		{"three successes", []ProviderCharge{ok("a"), ok("b"), ok("c")}, "a", []string{"b", "c"}},
		{"a success after failures", []ProviderCharge{failed("a"), waits("b"), ok("c"), failed("d")}, "c", nil},
		{"successes among failures", []ProviderCharge{failed("a"), ok("b"), failed("c"), ok("d")}, "b", []string{"d"}},
		{"failures only: the newest", []ProviderCharge{failed("a"), failed("b")}, "b", nil},
		{"a charge that waits wins over a newer failure", []ProviderCharge{waits("a"), failed("b")}, "a", nil},
		{"of those that wait, the newest", []ProviderCharge{waits("a"), waits("b"), failed("c")}, "b", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, duplicates := settleOn(tt.charges)
			require.Equal(t, tt.duplicates, duplicates)
			if tt.want == "" {
				require.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			require.Equal(t, tt.want, got.ID)
		})
	}
}
