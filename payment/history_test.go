package payment

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/history"
	"chargeonce/request"
)

// setupHistory is setup with a recorder, named instance, that the test
// flushes by reading (Service.History writes what it gathered first).
func setupHistory(t *testing.T, cfg Config, instance string) *bundle {
	t.Helper()
	b := setup(t, cfg)
	rec := history.NewRecorder(b.pool, history.Config{Instance: instance, FlushInterval: time.Hour})
	b.svc.cfg.History = rec
	b.svc.store.hist = rec
	return b
}

// timeline is the types of key's history of kind, in order.
func (b *bundle) timeline(t *testing.T, kind Kind, key string) ([]history.Event, []string) {
	t.Helper()
	events, err := b.svc.History(context.Background(), b.merchant, kind, key)
	require.NoError(t, err)
	types := make([]string, len(events))
	for i, e := range events {
		types[i] = e.Type
	}
	return events, types
}

func find(events []history.Event, typ string) []history.Event {
	var out []history.Event
	for _, e := range events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// A fresh charge's history names the request that made it, whether its id
// is the caller's own (kept in the claim's claim_source) or a UUID as the
// edge makes them (kept in claim_request_id, 16 B; claim_source then holds
// nothing), and its instance (claim_instance).
func TestHistory_FreshCharge_ClaimSendAnswerFinalizeEvent_ByItsRequest(t *testing.T) {
	t.Parallel()
	for _, requestID := range []string{"req-1", uuid.NewString()} {
		t.Run(requestID, func(t *testing.T) {
			t.Parallel()
			b := setupHistory(t, Config{}, "i-1")
			ctx := request.With(context.Background(), requestID)
			_, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(1200))
			require.NoError(t, err)

			events, types := b.timeline(t, KindCharge, "k")
			require.Equal(t, []string{history.Claimed, history.ProviderSent, history.ProviderAnswered, history.Finalized, history.EventWritten}, types)
			for _, e := range events {
				require.Equal(t, requestID, e.RequestID, e.Type)
				require.Equal(t, "i-1", e.Instance, e.Type)
				require.Equal(t, 1, e.Count)
			}
			a := attemptID(t, b, "k")
			require.Contains(t, events[1].Detail, "holder 1 sends under provider key chargeonce_"+a)
			require.Contains(t, events[2].Detail, "succeeded (")
			require.Contains(t, events[2].Detail, "after the claim")
			require.Equal(t, "SUCCEEDED", events[3].Status)
			require.Contains(t, events[3].Detail, "by the request that claimed it")
			require.Contains(t, events[4].Detail, EventChargeSucceeded)
			require.Equal(t, "PROCESSING", events[2].Status, "not final before it was recorded")
			// No row: who claimed it is on the attempt's row, which the claim
			// writes anyway; the answer, the result and the event are read from the
			// ledger, and the recorder wrote nothing.
			var rows int
			require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM attempt_history").Scan(&rows))
			require.Zero(t, rows)
			want := []string{"req-1||i-1"}
			if requestID != "req-1" {
				want = []string{"|" + requestID + "|i-1"}
			}
			require.Equal(t, want, dbtest.Query[string](t, b.pool, `SELECT coalesce(claim_source ->> 'request_id', '') || '|' ||
				coalesce(claim_request_id::text, '') || '|' || claim_instance FROM charge_attempts WHERE id = $1`, a),
				"the request id in claim_source or in claim_request_id, the instance in claim_instance")
		})
	}
}

func TestHistory_StormOnOneKey_OneClaimAndCountedRows(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{}, "i-1")
	const n = 200
	in := card("pm_card_slow") // 50 ms at the provider: the storm meets it in flight
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[Status]int{}
	replayed := 0
	for i := range n {
		wg.Go(func() {
			r, err := b.svc.ChargeCard(request.With(context.Background(), "storm-"+string(rune('a'+i%26))), b.merchant, "storm", in)
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			statuses[r.Status]++
			if r.Replayed {
				replayed++
			}
		})
	}
	wg.Wait()
	_, err := b.svc.ChargeCard(context.Background(), b.merchant, "storm", in) // one more, once it is final
	require.NoError(t, err)

	events, _ := b.timeline(t, KindCharge, "storm")
	require.Len(t, find(events, history.Claimed), 1, "one request claimed the key")
	processing, replays := find(events, history.Processing), find(events, history.Replayed)
	require.LessOrEqual(t, len(processing), 1, "PROCESSING answers are one counted row")
	require.Len(t, replays, 1, "replays are one counted row")
	answeredProcessing := statuses[StatusProcessing]
	counted := replays[0].Count
	if len(processing) == 1 {
		require.Equal(t, answeredProcessing, processing[0].Count, "every PROCESSING answer counted")
		require.False(t, processing[0].LastAt.Before(processing[0].At))
	} else {
		require.Zero(t, answeredProcessing)
	}
	require.Equal(t, replayed+1, counted, "every replay counted, the last one too")
	require.Equal(t, n+1, 1+answeredProcessing+counted, "each request is in the history once")
	require.Equal(t, 1, b.providerCharges(t, "storm"))
}

func TestHistory_Mismatch_NamesTheFieldsNeverTheValues(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{}, "i-1")
	ctx := context.Background()
	_, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(1200))
	require.NoError(t, err)
	other := visa(98765)
	other.OrderID = "order-secretive-42"
	_, err = b.svc.ChargeCard(ctx, b.merchant, "k", other)
	require.Equal(t, EKEYREUSED, ErrorCode(err))

	events, _ := b.timeline(t, KindCharge, "k")
	m := find(events, history.Mismatch)
	require.Len(t, m, 1)
	require.Equal(t, "idempotency_key_reused: refused, fields differ: amount, orderId", m[0].Detail)
	require.NotContains(t, m[0].Detail, "98765")
	require.NotContains(t, m[0].Detail, "order-secretive-42")
}

func TestHistory_RefusedBeforeTheClaim_NamedUnderTheKey(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{}, "i-1")
	ctx := context.Background()
	in := visa(500)
	in.OrderID = "o-1"
	_, err := b.svc.ChargeCard(ctx, b.merchant, "first", in)
	require.NoError(t, err)
	_, err = b.svc.ChargeCard(ctx, b.merchant, "second", in)
	require.Equal(t, EORDERPAID, ErrorCode(err))

	events, types := b.timeline(t, KindCharge, "second")
	require.Equal(t, []string{history.Refused}, types)
	require.True(t, strings.HasPrefix(events[0].Detail, EORDERPAID+": "), events[0].Detail)
}

func TestHistory_HolderDiesAfterTheClaim_ReconcilerTakesOverAndFinishes(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{}, "i-1")
	ctx := context.Background()
	a := b.abandon(t, "k", visa(500))
	b.clock.AdvancePast(a.LockedUntil)
	// Another instance's reconciler.
	other := history.NewRecorder(b.pool, history.Config{Instance: "i-2", FlushInterval: time.Hour})
	b.svc.cfg.History, b.svc.store.hist = other, other
	res, err := NewReconciler(b.svc, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 1, Succeeded: 1}, res)

	events, types := b.timeline(t, KindCharge, "k")
	require.Equal(t, []string{history.Claimed, history.ProviderSent, history.LeaseEnded, history.LeaseTaken,
		history.ProviderRead, history.ProviderSent, history.ProviderAnswered, history.Finalized, history.EventWritten}, types)
	require.Equal(t, "i-2", events[3].Instance, "the takeover names the reconciler's instance")
	require.Contains(t, events[3].Detail, "by the reconciler: holder 2")
	require.Contains(t, events[4].Detail, "holds nothing")
	require.Contains(t, events[7].Detail, "by the reconciler")
	require.Empty(t, events[7].RequestID, "no request finished it")
	require.WithinDuration(t, a.LockedUntil, events[2].At, time.Millisecond, "the lease ended when it ran out")
}

func TestHistory_LostAnswer_ReleasedThenReadBack(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{}, "i-1")
	ctx := context.Background()
	_, err := b.svc.ChargeCard(ctx, b.merchant, "k", card("pm_card_lostResponse"))
	require.NoError(t, err)
	b.clock.Advance(time.Millisecond)
	_, err = NewReconciler(b.svc, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)

	events, types := b.timeline(t, KindCharge, "k")
	require.Equal(t, []string{history.Claimed, history.ProviderSent, history.ProviderLost, history.LeaseReleased,
		history.LeaseEnded, history.LeaseTaken, history.ProviderRead, history.Finalized, history.EventWritten}, types)
	require.Contains(t, events[6].Detail, "succeeded (")
}

func TestHistory_ShopperAuthenticates_WaitStartedAndReturned(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{}, "i-1")
	ctx := context.Background()
	in := authInput("https://shop.example/return")
	first, err := b.svc.ChargeCard(ctx, b.merchant, "k", in)
	require.NoError(t, err)
	b.shopper(t, first.NextAction.URL, "complete")
	b.clock.Advance(AuthenticationRecheckDefault)
	done, err := b.svc.ChargeCard(ctx, b.merchant, "k", in)
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, done.Status)

	_, types := b.timeline(t, KindCharge, "k")
	require.Equal(t, []string{history.Claimed, history.ProviderSent, history.ProviderAnswered, history.WaitStarted,
		history.EventWritten, history.ProviderRead, history.WaitEnded, history.Finalized, history.EventWritten}, types)
}

func TestHistory_Refund_ItsOwnKeysHistory(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{}, "i-1")
	ctx := context.Background()
	paid, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(1000))
	require.NoError(t, err)
	_, err = b.svc.RefundCharge(ctx, b.merchant, "r", RefundInput{ChargeID: paid.Charge.ID, Amount: 400})
	require.NoError(t, err)
	_, err = b.svc.RefundCharge(ctx, b.merchant, "r", RefundInput{ChargeID: paid.Charge.ID, Amount: 400})
	require.NoError(t, err)

	events, types := b.timeline(t, KindRefund, "r")
	require.Equal(t, []string{history.Claimed, history.ProviderSent, history.ProviderAnswered, history.Finalized,
		history.EventWritten, history.Replayed}, types)
	require.Contains(t, events[4].Detail, EventRefundSucceeded)
	_, chargeTypes := b.timeline(t, KindCharge, "r")
	require.Empty(t, chargeTypes, "a refund's key is not a charge's")
}

func TestHistory_ForgottenWithItsKey(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{Retention: time.Hour}, "i-1")
	ctx := context.Background()
	_, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(1000))
	require.NoError(t, err)
	_, err = b.svc.ChargeCard(ctx, b.merchant, "refused", ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "o"})
	require.NoError(t, err)
	_, types := b.timeline(t, KindCharge, "k")
	require.NotEmpty(t, types)

	b.clock.Advance(2 * time.Hour)
	_, err = NewCleaner(b.svc, CleanerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	_, types = b.timeline(t, KindCharge, "k")
	require.Empty(t, types, "forgotten with the key's result")
}

func TestHistory_Declined_ReadFromTheAttemptsRow(t *testing.T) {
	t.Parallel()
	b := setupHistory(t, Config{}, "i-1")
	_, err := b.svc.ChargeCard(context.Background(), b.merchant, "k", card("pm_card_chargeDeclined"))
	require.NoError(t, err)
	events, types := b.timeline(t, KindCharge, "k")
	require.Equal(t, []string{history.Claimed, history.ProviderSent, history.ProviderAnswered, history.Finalized, history.EventWritten}, types)
	require.Contains(t, events[2].Detail, "failed: card_declined")
	require.Equal(t, "FAILED", events[3].Status)
	require.Contains(t, events[4].Detail, EventChargeFailed)
}
