package apitest

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/merchant"
)

func TestChargeCard_SameKeyConcurrently_ChargesOnce(t *testing.T) {
	t.Parallel()
	for _, pm := range []string{"pm_card_visa", "pm_card_slow"} {
		t.Run(pm, func(t *testing.T) {
			t.Parallel()
			s := Start(t, nil)
			key, input := NewKey(), WithPaymentMethod(pm)
			RequireOneCharge(t, s, key, input, Storm(t, []*Server{s}, 200, key, input))
		})
	}
}

func TestChargeCard_SameKeyAcrossTwoInstances_ChargesOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	a, b := StartOn(t, dbURL, nil), StartOn(t, dbURL, nil)
	key, input := NewKey(), WithPaymentMethod("pm_card_slow")
	responses := Storm(t, []*Server{a, b}, 200, key, input)
	RequireOneCharge(t, a, key, input, responses)
	require.Equal(t, 1, len(b.ProviderCharges(t, "demo", key)))
}

func TestChargeCard_Replay_ReturnsStoredCharge(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	key := NewKey()
	input := Visa(4250)
	input.OrderId = new("order-17")

	first := s.ChargeCard(t, "demo-key", key, input)
	require.Empty(t, first.Errors)
	p := first.Data.ChargeCard
	require.Equal(t, "SUCCEEDED", p.Status)
	require.False(t, p.Replayed)
	require.Equal(t, key, p.IdempotencyKey)
	require.Equal(t, 4250, p.Charge.Amount)
	require.Equal(t, "USD", p.Charge.Currency)
	require.Equal(t, "order-17", *p.Charge.OrderId)
	require.True(t, strings.HasPrefix(p.Charge.ProviderChargeId, "ch_"))
	require.NotNil(t, p.ExpiresAt)
	require.Nil(t, p.RetryAfterMs)
	require.Nil(t, p.Failure)

	second := s.ChargeCard(t, "demo-key", key, input)
	require.Empty(t, second.Errors)
	r := second.Data.ChargeCard
	require.True(t, r.Replayed)
	require.Equal(t, *p.Charge, *r.Charge, "the replay carries the identical charge")
	require.Equal(t, *p.ExpiresAt, *r.ExpiresAt)

	charges := s.ProviderCharges(t, "demo", key)
	require.Len(t, charges, 1)
	require.Equal(t, p.Charge.ProviderChargeId, charges[0].ID)
	require.Equal(t, int64(4250), charges[0].Amount)
	require.NotEqual(t, key, charges[0].IdempotencyKey, "the provider gets our own key, not the client's")
}

func TestChargeCard_SameKeyDifferentInput_IsRefused(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	key := NewKey()
	require.Equal(t, "SUCCEEDED", s.ChargeCard(t, "demo-key", key, Visa(1000)).Data.ChargeCard.Status)

	changes := map[string]func(*apiclient.ChargeCardInput){
		"amount":        func(in *apiclient.ChargeCardInput) { in.Amount = new(1001) },
		"currency":      func(in *apiclient.ChargeCardInput) { in.Currency = new("EUR") },
		"paymentMethod": func(in *apiclient.ChargeCardInput) { in.PaymentMethod = "pm_card_mastercard" },
		"orderId":       func(in *apiclient.ChargeCardInput) { in.OrderId = new("another-order") },
		"description":   func(in *apiclient.ChargeCardInput) { in.Description = new("something else") },
	}
	for field, change := range changes {
		in := Visa(1000)
		change(&in)
		r := s.ChargeCard(t, "demo-key", key, in)
		require.Equal(t, "IDEMPOTENCY_KEY_REUSED", r.Code(t), field)
		require.Nil(t, r.Data.ChargeCard)
	}
	require.Len(t, s.ProviderCharges(t, "demo", key), 1, "no second charge")
}

func TestChargeCard_EquivalentInput_IsAReplay(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	key := NewKey()
	first := s.ChargeCardRaw(t, "demo-key", key, map[string]any{
		"paymentMethod": "pm_card_visa", "currency": "USD", "amount": 500, "orderId": nil,
	})
	require.Equal(t, "SUCCEEDED", first.Data.ChargeCard.Status)
	// The same request with other field order, an omitted optional field and
	// empty strings for absent ones, sent as an inline literal with other whitespace.
	mutation := `mutation {
		chargeCard(  idempotencyKey: "` + key + `",
			input: { description: "", orderId: "", amount: 500,   currency: "USD", paymentMethod: "pm_card_visa" }
		) { ` + PayloadFields + ` } }`
	second := s.Do(t, Bearer("demo-key"), mutation, nil)
	require.Empty(t, second.Errors)
	require.True(t, second.Data.ChargeCard.Replayed)
	require.Equal(t, first.Data.ChargeCard.Charge.Id, second.Data.ChargeCard.Charge.Id)
}

func TestChargeCard_Decline_IsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	for pm, code := range map[string]string{
		"pm_card_chargeDeclined":    "card_declined",
		"pm_card_insufficientFunds": "insufficient_funds",
		"pm_card_unknownToken":      "payment_method_unknown",
	} {
		key := NewKey()
		first := s.ChargeCard(t, "demo-key", key, WithPaymentMethod(pm)).Data.ChargeCard
		require.Equal(t, "FAILED", first.Status, pm)
		require.Equal(t, code, first.Failure.Code)
		require.NotEmpty(t, first.Failure.Message)
		require.Nil(t, first.Charge)
		require.False(t, first.Replayed)

		again := s.ChargeCard(t, "demo-key", key, WithPaymentMethod(pm)).Data.ChargeCard
		require.Equal(t, "FAILED", again.Status)
		require.True(t, again.Replayed)
		require.Equal(t, *first.Failure, *again.Failure)
		for _, c := range s.ProviderCharges(t, "demo", key) {
			require.Equal(t, "failed", c.Status, "a decline never moves money")
		}
	}
}

func TestChargeCard_UnknownOutcome_StaysProcessing(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// No reconciler pass during the test: what the request itself leaves behind is checked here.
	s := StartOn(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h"})
	pool := dbtest.Open(t, dbURL)
	for pm, want := range map[string]struct {
		providerCharges int
		afterRetry      string
	}{
		// Charged, but the answer never arrived: the retry takes the released
		// attempt over, finds the charge by our provider key and records it.
		"pm_card_lostResponse": {1, "SUCCEEDED"},
		// 500 without charging: the retry sends it again, still unknown.
		"pm_card_providerError": {0, "PROCESSING"},
	} {
		key := NewKey()
		r := s.ChargeCard(t, "demo-key", key, WithPaymentMethod(pm))
		require.Empty(t, r.Errors, pm)
		p := r.Data.ChargeCard
		require.Equal(t, "PROCESSING", p.Status, pm)
		require.NotNil(t, p.RetryAfterMs)
		require.Positive(t, *p.RetryAfterMs)
		require.Nil(t, p.Failure)

		require.Equal(t, "PROCESSING", AttemptStatus(t, pool, key), "the attempt is neither FAILED nor deleted")
		status := s.ChargeStatus(t, "demo-key", key).Data.ChargeStatus
		require.Equal(t, "PROCESSING", status.Status)
		retry := s.ChargeCard(t, "demo-key", key, WithPaymentMethod(pm)).Data.ChargeCard
		require.Equal(t, want.afterRetry, retry.Status, pm)
		require.Len(t, s.ProviderCharges(t, "demo", key), want.providerCharges, "%s: a retry does not charge again", pm)
	}
	// The service's own lines about a request carry its request id.
	for _, line := range strings.Split(s.LogText(), "\n") {
		if strings.Contains(line, "provider outcome unknown") {
			require.Contains(t, line, "request_id=", line)
		}
	}
	require.Contains(t, s.LogText(), "provider outcome unknown")
}

func TestChargeCard_KeysAreScopedPerMerchant(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	dbURL := s.DatabaseURL
	pool := dbtest.Open(t, dbURL)
	_, acmeKey, err := merchant.New(pool, false).CreateAPIKey(context.Background(), "acme", merchant.KeySecret)
	require.NoError(t, err)

	key := "order-42-attempt-1" // a key two merchants may well both choose
	demo := s.ChargeCard(t, "demo-key", key, Visa(100)).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", demo.Status)
	require.Nil(t, s.ChargeStatus(t, acmeKey, key).Data.ChargeStatus, "acme cannot see demo's result")

	acme := s.ChargeCard(t, acmeKey, key, Visa(999)).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", acme.Status, "the same key string is acme's own attempt, not a reuse")
	require.False(t, acme.Replayed)
	require.NotEqual(t, demo.Charge.Id, acme.Charge.Id)
	require.Len(t, s.ProviderCharges(t, "demo", key), 1)
	require.Len(t, s.ProviderCharges(t, "acme", key), 1)
	require.Equal(t, 100, s.ChargeStatus(t, "demo-key", key).Data.ChargeStatus.Charge.Amount)
}
