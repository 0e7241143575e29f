package payment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// charged is a SUCCEEDED charge of amount, made with key.
func (b *bundle) charged(t *testing.T, key string, in ChargeInput) *Charge {
	t.Helper()
	r, err := b.svc.ChargeCard(context.Background(), b.merchant, key, in)
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, r.Status)
	return r.Charge
}

// settleRefund runs the reconciler, the clock moving on by more than the
// refund check interval each pass, until the refund of key is want (the
// provider settles pending refunds by the same clock), and returns it.
func (b *bundle) settleRefund(t *testing.T, key string, want Status) *Result {
	t.Helper()
	ctx := context.Background()
	rec := NewReconciler(b.svc, ReconcilerConfig{})
	var got *Result
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b.clock.Advance(b.svc.cfg.RefundCheckInterval + time.Second)
		_, err := rec.RunOnce(ctx)
		require.NoError(c, err)
		got, err = b.svc.RefundStatus(ctx, b.merchant, key)
		require.NoError(c, err)
		require.Equal(c, want, got.Status)
	}, 20*time.Second, 100*time.Millisecond)
	return got
}

func TestRefund_SucceedsReplaysAndRefusesAnotherInput(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	c := b.charged(t, "charge", visa(100))

	r, err := b.svc.RefundCharge(ctx, b.merchant, "refund-1", RefundInput{ChargeID: c.ID, Amount: 30, Reason: "damaged"})
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, r.Status)
	require.False(t, r.Replayed)
	require.NotNil(t, r.Refund)
	require.Equal(t, int64(30), r.Refund.Amount)
	require.Equal(t, "USD", r.Refund.Currency)
	require.Equal(t, "damaged", r.Refund.Reason)
	require.NotEmpty(t, r.Refund.ProviderRefundID)

	replay, err := b.svc.RefundCharge(ctx, b.merchant, "refund-1", RefundInput{ChargeID: c.ID, Amount: 30, Reason: "damaged"})
	require.NoError(t, err)
	require.True(t, replay.Replayed)
	require.Equal(t, r.Refund.ID, replay.Refund.ID)

	_, err = b.svc.RefundCharge(ctx, b.merchant, "refund-1", RefundInput{ChargeID: c.ID, Amount: 31})
	require.Equal(t, EKEYREUSED, ErrorCode(err))
	_, err = b.svc.ChargeCard(ctx, b.merchant, "refund-1", visa(30))
	require.Equal(t, EKEYREUSED, ErrorCode(err), "a refund's key is not a charge's")
	_, err = b.svc.RefundCharge(ctx, b.merchant, "charge", RefundInput{ChargeID: c.ID, Amount: 30})
	require.Equal(t, EKEYREUSED, ErrorCode(err), "a charge's key is not a refund's")

	status, err := b.svc.RefundStatus(ctx, b.merchant, "refund-1")
	require.NoError(t, err)
	require.Equal(t, r.Refund.ID, status.Refund.ID)
	none, err := b.svc.RefundStatus(ctx, b.merchant, "charge")
	require.NoError(t, err)
	require.Nil(t, none, "a charge's key has no refund")
	chargeOfRefund, err := b.svc.ChargeStatus(ctx, b.merchant, "refund-1")
	require.NoError(t, err)
	require.Nil(t, chargeOfRefund, "a refund's key has no charge")

	// Without an amount: what remains.
	rest, err := b.svc.RefundCharge(ctx, b.merchant, "refund-2", RefundInput{ChargeID: c.ID})
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, rest.Status)
	require.Equal(t, int64(70), rest.Refund.Amount)
	again, err := b.svc.RefundCharge(ctx, b.merchant, "refund-2", RefundInput{ChargeID: c.ID})
	require.NoError(t, err)
	require.True(t, again.Replayed, "the retry of a refund of what remained replays, though nothing remains")

	refunded, refunds, err := b.svc.Refunds(ctx, b.merchant, c.ID)
	require.NoError(t, err)
	require.Equal(t, int64(100), refunded)
	require.Len(t, refunds, 2)
	n, sum := b.providerRefunds(t, c)
	require.Equal(t, 2, n)
	require.Equal(t, int64(100), sum)
	require.Equal(t, 1, b.events(t, "refund-1", EventRefundSucceeded))
	require.Equal(t, 1, b.events(t, "refund-2", EventRefundSucceeded))
}

func TestRefund_Refusals_ClaimAndSendNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	c := b.charged(t, "charge", visa(100))
	other, err := newMerchant(ctx, b.pool, "other")
	require.NoError(t, err)

	_, err = b.svc.RefundCharge(ctx, b.merchant, "too-much", RefundInput{ChargeID: c.ID, Amount: 101})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, EREFUNDEXCEEDS, e.Code)
	require.Equal(t, int64(100), e.Refundable)
	_, err = b.svc.RefundCharge(ctx, other, "theirs", RefundInput{ChargeID: c.ID, Amount: 1})
	require.Equal(t, ECHARGENOTFOUND, ErrorCode(err), "another merchant's charge is unknown")
	_, err = b.svc.RefundCharge(ctx, b.merchant, "unknown", RefundInput{ChargeID: newID(), Amount: 1})
	require.Equal(t, ECHARGENOTFOUND, ErrorCode(err))
	_, err = b.svc.RefundCharge(ctx, b.merchant, "negative", RefundInput{ChargeID: c.ID, Amount: -1})
	require.Equal(t, EINVALID, ErrorCode(err))

	var attempts int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM charge_attempts WHERE kind = 'refund'`).Scan(&attempts))
	require.Zero(t, attempts, "nothing was claimed")
	n, _ := b.providerRefunds(t, c)
	require.Zero(t, n, "nothing was sent")

	// The refused keys are free: the same key with a request that fits works.
	r, err := b.svc.RefundCharge(ctx, b.merchant, "too-much", RefundInput{ChargeID: c.ID, Amount: 100})
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, r.Status)
	_, err = b.svc.RefundCharge(ctx, b.merchant, "nothing-left", RefundInput{ChargeID: c.ID})
	require.ErrorAs(t, err, &e)
	require.Equal(t, EREFUNDEXCEEDS, e.Code)
	require.Zero(t, e.Refundable)
}

func TestRefund_ConcurrentPartialRefunds_NeverMoreThanCharged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		charge, each      int64
		requests, succeed int
	}{
		{"50 refunds of 60 on 100", 100, 60, 50, 1},
		{"40 refunds of 5 on 100", 100, 5, 40, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			c := b.charged(t, "charge", visa(tc.charge))
			var mu sync.Mutex
			codes := map[string]int{}
			var wg sync.WaitGroup
			for i := range tc.requests {
				wg.Go(func() {
					r, err := b.svc.RefundCharge(context.Background(), b.merchant, fmt.Sprintf("refund-%d", i), RefundInput{ChargeID: c.ID, Amount: tc.each})
					code := string(r.Status)
					if err != nil {
						code = ErrorCode(err)
					}
					mu.Lock()
					codes[code]++
					mu.Unlock()
				})
			}
			wg.Wait()
			require.Equal(t, map[string]int{string(StatusSucceeded): tc.succeed, EREFUNDEXCEEDS: tc.requests - tc.succeed}, codes)
			n, sum := b.providerRefunds(t, c)
			require.Equal(t, tc.succeed, n)
			require.Equal(t, int64(tc.succeed)*tc.each, sum)
			require.Equal(t, int64(tc.succeed)*tc.each, b.refunded(t, c))
		})
	}
}

func TestRefund_SameKeyConcurrently_OneProviderRefund(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := b.charged(t, "charge", visa(100))
	const requests = 200
	results := make([]Result, requests)
	errs := make([]error, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			results[i], errs[i] = b.svc.RefundCharge(context.Background(), b.merchant, "one-refund", RefundInput{ChargeID: c.ID, Amount: 40})
		})
	}
	wg.Wait()
	fresh, statuses := 0, map[Status]int{}
	for i := range requests {
		require.NoError(t, errs[i])
		statuses[results[i].Status]++
		if results[i].Status == StatusSucceeded && !results[i].Replayed {
			fresh++
		}
	}
	require.Equal(t, 1, fresh, "one request refunded; the others replayed or waited")
	require.Zero(t, statuses[StatusFailed])
	n, sum := b.providerRefunds(t, c)
	require.Equal(t, 1, n)
	require.Equal(t, int64(40), sum)
	require.Equal(t, int64(40), b.refunded(t, c))
}

func TestRefund_PendingThenSucceeded_ReadNeverSentAgain(t *testing.T) {
	t.Parallel()
	b, counting := setupCounting(t, Config{RefundCheckInterval: time.Second})
	ctx := context.Background()
	c := b.charged(t, "charge", card("pm_card_refundPending"))
	r, err := b.svc.RefundCharge(ctx, b.merchant, "pending", RefundInput{ChargeID: c.ID, Amount: 50})
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)
	require.InDelta(t, float64(b.svc.cfg.RefundCheckInterval), float64(r.RetryAfter), float64(50*time.Millisecond), "come back at the next read")
	require.Equal(t, int64(0), b.refunded(t, c), "a pending refund has not refunded yet")

	b.settleRefund(t, "pending", StatusSucceeded)
	require.Equal(t, int32(1), counting.refundCreates.Load(), "a pending refund is read, never sent again")
	require.Equal(t, int64(50), b.refunded(t, c))
	require.Equal(t, 1, b.events(t, "pending", EventRefundSucceeded))
}

func TestRefund_PendingThenFailed_GivesTheAmountBack(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RefundCheckInterval: time.Second})
	ctx := context.Background()
	c := b.charged(t, "charge", card("pm_card_refundFailsLater"))
	r, err := b.svc.RefundCharge(ctx, b.merchant, "fails", RefundInput{ChargeID: c.ID})
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)
	_, err = b.svc.RefundCharge(ctx, b.merchant, "meanwhile", RefundInput{ChargeID: c.ID, Amount: 1})
	require.Equal(t, EREFUNDEXCEEDS, ErrorCode(err), "the pending refund holds the whole charge")

	s := b.settleRefund(t, "fails", StatusFailed)
	require.Equal(t, "expired_or_canceled_card", s.Failure.Code)
	require.Equal(t, 1, b.events(t, "fails", EventRefundFailed))
	require.Equal(t, int64(0), b.refunded(t, c))

	later, err := b.svc.RefundCharge(ctx, b.merchant, "later", RefundInput{ChargeID: c.ID})
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, later.Status, "the failed refund gave its amount back")
	require.Equal(t, int64(1999), later.Refund.Amount)
	require.Equal(t, int64(1999), b.refunded(t, c))
}

func TestRefund_LostAnswerAndDeadProvider_TheReconcilerEndsEach(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	c := b.charged(t, "charge", visa(100))
	down := &refundsDown{Provider: b.provider}
	b.svc = NewService(b.pool, down, b.svc.cfg)

	// The provider refunds, and the answer is lost.
	down.loseAnswers.Store(true)
	r, err := b.svc.RefundCharge(ctx, b.merchant, "lost", RefundInput{ChargeID: c.ID, Amount: 30})
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)
	// The provider cannot be reached at all.
	down.loseAnswers.Store(false)
	down.dead.Store(true)
	r, err = b.svc.RefundCharge(ctx, b.merchant, "dead", RefundInput{ChargeID: c.ID, Amount: 20})
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)
	n, _ := b.providerRefunds(t, c)
	require.Equal(t, 1, n, "only the lost answer's refund reached the provider")

	down.dead.Store(false)
	b.clock.Advance(b.svc.cfg.Lease + time.Second)
	res, err := NewReconciler(b.svc, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 2, Succeeded: 2}, res)
	for key, amount := range map[string]int64{"lost": 30, "dead": 20} {
		s, err := b.svc.RefundStatus(ctx, b.merchant, key)
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, s.Status, key)
		require.Equal(t, amount, s.Refund.Amount, key)
		require.Equal(t, 1, b.events(t, key, EventRefundSucceeded), key)
	}
	n, sum := b.providerRefunds(t, c)
	require.Equal(t, 2, n, "one provider refund each")
	require.Equal(t, int64(50), sum)
	require.Equal(t, int64(50), b.refunded(t, c))
}

// refundsDown is the provider with its refunds' answers lost
// (the refund happens, its answer does not arrive), with the provider
// dead (nothing arrives there), or with sends lost and reads finding
// nothing (unseen: the provider is still processing them).
type refundsDown struct {
	Provider
	loseAnswers, dead, unseen atomic.Bool
}

func (p *refundsDown) CreateRefund(ctx context.Context, req ProviderRefundRequest) (ProviderRefund, error) {
	if p.dead.Load() || p.unseen.Load() {
		return ProviderRefund{}, fmt.Errorf("connection refused: %w", ErrOutcomeUnknown)
	}
	r, err := p.Provider.CreateRefund(ctx, req)
	if err == nil && p.loseAnswers.Load() {
		return ProviderRefund{}, fmt.Errorf("the answer was lost: %w", ErrOutcomeUnknown)
	}
	return r, err
}

func (p *refundsDown) FindRefund(ctx context.Context, req ProviderRefundRequest) (*ProviderRefund, error) {
	if p.dead.Load() {
		return nil, errors.New("connection refused")
	}
	if p.unseen.Load() {
		return nil, nil
	}
	return p.Provider.FindRefund(ctx, req)
}

func TestRefund_ProviderUnseenPastTheRedriveWindow_IsReadUntilTheWatchEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RedriveWindow: time.Minute, LateChargeWatch: time.Hour})
	ctx := context.Background()
	c := b.charged(t, "charge", visa(100))
	down := &refundsDown{Provider: b.provider}
	b.svc = NewService(b.pool, down, b.svc.cfg)
	down.dead.Store(true)
	for _, key := range []string{"lands", "never"} {
		r, err := b.svc.RefundCharge(ctx, b.merchant, key, RefundInput{ChargeID: c.ID, Amount: 40})
		require.NoError(t, err)
		require.Equal(t, StatusProcessing, r.Status)
	}
	// The provider answers reads again but still shows neither refund,
	// past the redrive window: neither fails, so neither gives its amount
	// back for a second refund to spend.
	down.dead.Store(false)
	down.unseen.Store(true)
	rec := NewReconciler(b.svc, ReconcilerConfig{})
	b.clock.Advance(time.Minute + b.svc.cfg.Lease)
	_, err := rec.RunOnce(ctx)
	require.NoError(t, err)
	for _, key := range []string{"lands", "never"} {
		s, err := b.svc.RefundStatus(ctx, b.merchant, key)
		require.NoError(t, err)
		require.Equal(t, StatusProcessing, s.Status, key)
	}
	_, err = b.svc.RefundCharge(ctx, b.merchant, "more", RefundInput{ChargeID: c.ID, Amount: 30})
	require.Equal(t, EREFUNDEXCEEDS, ErrorCode(err), "the unseen refunds still hold their 80")

	// The send of "lands" that was in flight completes at the provider.
	a, err := b.svc.store.get(ctx, b.merchant.ID, uuid.Nil, "lands")
	require.NoError(t, err)
	req, err := b.svc.refundRequest(ctx, b.merchant, a)
	require.NoError(t, err)
	_, err = b.provider.CreateRefund(ctx, req)
	require.NoError(t, err)
	down.unseen.Store(false)
	b.clock.Advance(b.svc.cfg.RefundCheckInterval + time.Second)
	_, err = rec.RunOnce(ctx)
	require.NoError(t, err)
	s, err := b.svc.RefundStatus(ctx, b.merchant, "lands")
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, s.Status, "found by reading, never sent again")

	// "never" is read until the watch ends, then fails and gives its 40 back.
	b.clock.Advance(time.Hour)
	_, err = rec.RunOnce(ctx)
	require.NoError(t, err)
	s, err = b.svc.RefundStatus(ctx, b.merchant, "never")
	require.NoError(t, err)
	require.Equal(t, StatusFailed, s.Status)
	require.Equal(t, FailureProviderUnavailable, s.Failure.Code)
	n, sum := b.providerRefunds(t, c)
	require.Equal(t, 1, n, "one provider refund: the one that landed")
	require.Equal(t, int64(40), sum)
	require.Equal(t, int64(40), b.refunded(t, c))
	r, err := b.svc.RefundCharge(ctx, b.merchant, "rest", RefundInput{ChargeID: c.ID})
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, r.Status)
	require.Equal(t, int64(60), r.Refund.Amount, "what remains, the failed one's amount back")
}
