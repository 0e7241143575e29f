package stripe_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/loop/looptest"
	"chargeonce/payment"
	"chargeonce/provider/stripe"
	"chargeonce/provider/stripe/stripefake"
)

// The adapter through chargeonce's API: a whole server (apitest's harness)
// with PROVIDER=stripe against a fake Stripe, so that what a client sees of
// each Stripe answer, and what the reconciler and the webhook make of it,
// is tested beside the adapter that reads it. The adapter's own calls are
// provider_test.go's; every provider's contract is conformance_test.go's.

// stripeServer starts an in-process server on a fresh database that charges
// through a fake Stripe, with env on top.
func stripeServer(t *testing.T, env map[string]string) (*apitest.Server, *stripefake.Server, string) {
	t.Helper()
	dbURL := dbtest.NewDatabase(t)
	fake := stripefake.Start(t)
	return apitest.StartOn(t, dbURL, fake.Env(env)), fake, dbURL
}

func TestStripe_ChargeCard_MapsEachOutcome(t *testing.T) {
	t.Parallel()
	s, fake, dbURL := stripeServer(t, nil)
	tests := []struct {
		pm, status, code string
	}{
		{"pm_card_visa", "SUCCEEDED", ""},
		{"pm_card_chargeDeclined", "FAILED", "card_declined"},
		{"pm_card_chargeDeclinedInsufficientFunds", "FAILED", "insufficient_funds"},
		{"pm_card_chargeDeclinedExpiredCard", "FAILED", "expired_card"},
		{"pm_card_authenticationRequired", "FAILED", "authentication_required"},
		{"pm_card_threeDSecure2Required", "FAILED", "authentication_required"},
	}
	for _, tt := range tests {
		key := apitest.NewKey()
		r := s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod(tt.pm))
		require.Empty(t, r.Errors, tt.pm)
		p := r.Data.ChargeCard
		require.Equal(t, tt.status, p.Status, tt.pm)
		intents := fake.ClientIntents(key)
		require.Len(t, intents, 1, "%s: one PaymentIntent", tt.pm)
		attemptID, providerKey := apitest.StoredProviderKey(t, dbURL, key)
		require.Equal(t, "chargeonce_"+attemptID, providerKey)
		require.Equal(t, providerKey, intents[0].IdempotencyKey, "%s: created under our provider key", tt.pm)
		require.Equal(t, attemptID, intents[0].Metadata["chargeonce_attempt_id"])
		require.Equal(t, "demo", intents[0].Metadata["merchant"])
		require.Equal(t, "usd", intents[0].Currency)
		if tt.status == "SUCCEEDED" {
			require.Equal(t, intents[0].ID, p.Charge.ProviderChargeId, "the PaymentIntent id is the provider charge id")
		} else {
			require.Equal(t, tt.code, p.Failure.Code, tt.pm)
			require.NotContains(t, p.Failure.Message, "Your card", "a fixed message, not Stripe's text")
		}
		if tt.code == "authentication_required" {
			require.Equal(t, "canceled", intents[0].Status, "a PaymentIntent that needs 3-D Secure is cancelled at Stripe")
			require.Contains(t, p.Failure.Message, "which this checkout cannot perform")
		}
		replay := s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod(tt.pm)).Data.ChargeCard
		require.True(t, replay.Replayed)
		require.Equal(t, p.Status, replay.Status)
	}
	require.Len(t, fake.Intents(), len(tests), "replays never reach Stripe")
}

func TestStripe_SameKeyStorm_OnePaymentIntent(t *testing.T) {
	t.Parallel()
	s, fake, _ := stripeServer(t, nil)
	fake.SlowDelay = 300 * time.Millisecond // the storm arrives while Stripe works
	fake.Script(func(c stripefake.Call) stripefake.Fault {
		if c.Method == http.MethodPost {
			return stripefake.Slow
		}
		return stripefake.None
	})
	key, input := apitest.NewKey(), apitest.WithPaymentMethod("pm_card_visa")
	responses := apitest.Storm(t, []*apitest.Server{s}, 100, key, input)
	chargeIDs := map[string]int{}
	statuses := map[string]int{}
	for i, r := range responses {
		require.Empty(t, r.Errors, "response %d", i)
		p := r.Data.ChargeCard
		statuses[p.Status]++
		switch p.Status {
		case "SUCCEEDED":
			chargeIDs[p.Charge.ProviderChargeId]++
		case "PROCESSING":
			require.Positive(t, *p.RetryAfterMs)
		default:
			t.Fatalf("response %d: %s", i, p.Status)
		}
	}
	t.Logf("statuses over %d requests: %v", len(responses), statuses)
	require.Len(t, chargeIDs, 1)
	intents := fake.ClientIntents(key)
	require.Len(t, intents, 1, "one PaymentIntent for 100 requests")
	for id := range chargeIDs {
		require.Equal(t, intents[0].ID, id)
	}
	require.Len(t, fake.CreateKeys(), 1, "one send: the claim kept the other 99 from Stripe")
}

func TestStripe_InlineRetry_409InUse_SameKeyThenSucceeded(t *testing.T) {
	t.Parallel()
	s, fake, dbURL := stripeServer(t, nil)
	fake.FailCreates(stripefake.InUse, 1)
	key := apitest.NewKey()
	r := s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod("pm_card_visa")).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", r.Status, "the request retried inline")
	_, providerKey := apitest.StoredProviderKey(t, dbURL, key)
	require.Equal(t, []string{providerKey, providerKey}, fake.CreateKeys(), "the inline retry sent the same key")
	require.Len(t, fake.ClientIntents(key), 1)
}

func TestStripe_LostResponse_ReconcilerFindsTheOnePaymentIntent(t *testing.T) {
	t.Parallel()
	s, fake, dbURL := stripeServer(t, map[string]string{"PROCESSING_LEASE": "2s", "RECONCILE_INTERVAL": "200ms"})
	// Stripe charges, and every answer to the request's sends is lost.
	fake.FailCreates(stripefake.CutAfterRun, 3)
	key := apitest.NewKey()
	r := s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod("pm_card_visa")).Data.ChargeCard
	require.Equal(t, "PROCESSING", r.Status, "nobody knows yet")

	final := s.FinalStatus(t, key, 15*time.Second)
	require.Equal(t, "SUCCEEDED", final.Status, "the reconciler found the PaymentIntent by the attempt")
	intents := fake.ClientIntents(key)
	require.Len(t, intents, 1)
	require.Equal(t, intents[0].ID, final.Charge.ProviderChargeId)
	_, providerKey := apitest.StoredProviderKey(t, dbURL, key)
	for _, k := range fake.CreateKeys() {
		require.Equal(t, providerKey, k, "one key for every send")
	}
	require.Len(t, fake.CreateKeys(), 3, "the inline retries, then the lookup: no further send")
}

func TestStripe_Reconciler_ResendsUnderTheSameKey(t *testing.T) {
	t.Parallel()
	s, fake, dbURL := stripeServer(t, map[string]string{"PROCESSING_LEASE": "2s", "RECONCILE_INTERVAL": "200ms"})
	// Stripe is away for the request's three sends; nothing is saved.
	fake.FailCreates(stripefake.Unavailable, 3)
	key := apitest.NewKey()
	require.Equal(t, "PROCESSING", s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod("pm_card_visa")).Data.ChargeCard.Status)

	final := s.FinalStatus(t, key, 15*time.Second)
	require.Equal(t, "SUCCEEDED", final.Status)
	_, providerKey := apitest.StoredProviderKey(t, dbURL, key)
	require.Equal(t, []string{providerKey, providerKey, providerKey, providerKey}, fake.CreateKeys(),
		"the reconciler found nothing and sent it again under the same key")
	intents := fake.ClientIntents(key)
	require.Len(t, intents, 1)
	require.Equal(t, intents[0].ID, final.Charge.ProviderChargeId)
}

func TestStripe_Replayed500_LooksUpAndRekeysOnlyWhenStripeHoldsNone(t *testing.T) {
	t.Parallel()
	t.Run("nothing at Stripe: a new key, recorded, then sent", func(t *testing.T) {
		t.Parallel()
		s, fake, dbURL := stripeServer(t, map[string]string{"PROCESSING_LEASE": "2s", "RECONCILE_INTERVAL": "200ms"})
		fake.FailCreates(stripefake.Error500, 1) // saved, and replayed for every later send of the key
		key := apitest.NewKey()
		require.Equal(t, "PROCESSING", s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod("pm_card_visa")).Data.ChargeCard.Status)

		final := s.FinalStatus(t, key, 15*time.Second)
		require.Equal(t, "SUCCEEDED", final.Status)
		attemptID, providerKey := apitest.StoredProviderKey(t, dbURL, key)
		first := "chargeonce_" + attemptID
		require.Equal(t, first+"_2", providerKey, "the new key is derived from the attempt, and recorded on it")
		keys := fake.CreateKeys()
		require.Equal(t, providerKey, keys[len(keys)-1])
		for _, k := range keys[:len(keys)-1] {
			require.Equal(t, first, k, "every send before the rekey used the first key")
		}
		intents := fake.ClientIntents(key)
		require.Len(t, intents, 1, "one PaymentIntent")
		require.Equal(t, providerKey, intents[0].IdempotencyKey)
		require.Equal(t, intents[0].ID, final.Charge.ProviderChargeId)
		require.Contains(t, s.LogText(), "recorded a new provider key")
	})
	t.Run("a PaymentIntent at Stripe: it is used, the key stays", func(t *testing.T) {
		t.Parallel()
		s, fake, dbURL := stripeServer(t, map[string]string{"PROCESSING_LEASE": "2s", "RECONCILE_INTERVAL": "200ms"})
		fake.FailCreates(stripefake.Error500AfterCreate, 1) // created, never confirmed, 500 saved
		key := apitest.NewKey()
		// The request's inline retry meets the replayed 500, looks the attempt
		// up, finds the PaymentIntent and confirms it.
		require.Equal(t, "SUCCEEDED", s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod("pm_card_visa")).Data.ChargeCard.Status)

		final := s.FinalStatus(t, key, 15*time.Second)
		require.Equal(t, "SUCCEEDED", final.Status)
		attemptID, providerKey := apitest.StoredProviderKey(t, dbURL, key)
		require.Equal(t, "chargeonce_"+attemptID, providerKey, "never rekeyed while Stripe holds a PaymentIntent")
		for _, k := range fake.CreateKeys() {
			require.Equal(t, providerKey, k)
		}
		intents := fake.ClientIntents(key)
		require.Len(t, intents, 1, "the one PaymentIntent, confirmed")
		require.Equal(t, intents[0].ID, final.Charge.ProviderChargeId)
	})
}

func TestStripe_Processing_StaysProcessingUntilStripeIsFinal(t *testing.T) {
	t.Parallel()
	s, fake, _ := stripeServer(t, map[string]string{"PROCESSING_LEASE": "2s", "RECONCILE_INTERVAL": "200ms"})
	key := apitest.NewKey()
	require.Equal(t, "PROCESSING", s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod("pm_card_processing")).Data.ChargeCard.Status)
	// Past the lease, the reconciler asks, more than once, and leaves it open.
	for _, p := range looptest.WaitFor(t, s.Passes.Reconcile, 2, apitest.TookOver) {
		require.Equal(t, payment.ReconcileResult{Taken: 1, Open: 1}, p.Next.Result)
	}
	require.Equal(t, "PROCESSING", s.ChargeStatus(t, "demo-key", key).Data.ChargeStatus.Status, "never guessed")

	fake.SetStatus(fake.ClientIntents(key)[0].ID, "succeeded")
	final := s.FinalStatus(t, key, 10*time.Second)
	require.Equal(t, "SUCCEEDED", final.Status)
	require.Len(t, fake.ClientIntents(key), 1)
}

func TestStripe_SecretKeyIsNeverLogged(t *testing.T) {
	t.Parallel()
	fake := stripefake.New("")
	t.Cleanup(fake.Close)
	const wrong = "sk_test_NeverInTheLog000000000000"
	// Stripe refuses the key (the fake quotes it back whole in its answer).
	s := apitest.Start(t, map[string]string{"PROVIDER": "stripe", "STRIPE_SECRET_KEY": wrong,
		"STRIPE_API_BASE": fake.URL, "PROCESSING_LEASE": "1s", "RECONCILE_INTERVAL": "100ms"})
	key := apitest.NewKey()
	r := s.ChargeCard(t, "demo-key", key, apitest.WithPaymentMethod("pm_card_visa"))
	require.Empty(t, r.Errors)
	require.Equal(t, "PROCESSING", r.Data.ChargeCard.Status, "nothing charged; it waits for an operator to fix the key")
	require.Eventually(t, func() bool { return strings.Count(s.LogText(), "STRIPE_SECRET_KEY") >= 2 }, 10*time.Second, 50*time.Millisecond,
		"the request and the reconciler both say what to fix")
	require.NotContains(t, s.LogText(), wrong)
	require.NotContains(t, s.LogText(), "NeverInTheLog")
	require.Empty(t, fake.Intents())

	// A working key, a network failure: still never in the log.
	good, fake2, _ := stripeServer(t, nil)
	require.Equal(t, "SUCCEEDED", good.ChargeCard(t, "demo-key", apitest.NewKey(), apitest.WithPaymentMethod("pm_card_visa")).Data.ChargeCard.Status)
	fake2.Close()
	require.Equal(t, "PROCESSING", good.ChargeCard(t, "demo-key", apitest.NewKey(), apitest.WithPaymentMethod("pm_card_visa")).Data.ChargeCard.Status)
	require.NotContains(t, good.LogText(), fake2.SecretKey)
}

func TestStripe_Currencies_ConvertedOrRefusedThroughTheAPI(t *testing.T) {
	t.Parallel()
	s, fake, _ := stripeServer(t, nil)
	for _, tt := range []struct {
		currency           string
		amount, wantStripe int64
		status             string
	}{
		{"ISK", 500, 50000, "SUCCEEDED"},
		{"JPY", 500, 500, "SUCCEEDED"},
		{"KWD", 1230, 1230, "SUCCEEDED"},
		{"KWD", 1234, 0, "FAILED"},
	} {
		key := apitest.NewKey()
		in := apitest.Visa(int(tt.amount))
		in.Currency = new(tt.currency)
		r := s.ChargeCard(t, "demo-key", key, in).Data.ChargeCard
		require.Equal(t, tt.status, r.Status, "%s %d", tt.currency, tt.amount)
		intents := fake.ClientIntents(key)
		if tt.status == "FAILED" {
			require.Equal(t, stripe.CodeAmountNotSupported, r.Failure.Code)
			require.Empty(t, intents, "refused before anything was sent")
			continue
		}
		require.Equal(t, tt.amount, int64(r.Charge.Amount), "chargeonce keeps the ISO amount")
		require.Equal(t, tt.wantStripe, intents[0].Amount, "Stripe gets its own unit")
	}
}

// The storm across two instances needs nothing of Stripe's but its
// idempotency: each instance is its own Provider, both on one fake.
func TestStripe_SameKeyAcrossTwoInstances_OnePaymentIntent(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	fake := stripefake.Start(t)
	env := fake.Env()
	fake.SlowDelay = 200 * time.Millisecond
	fake.Script(func(c stripefake.Call) stripefake.Fault {
		if c.Method == http.MethodPost {
			return stripefake.Slow
		}
		return stripefake.None
	})
	a, b := apitest.StartOn(t, dbURL, env), apitest.StartOn(t, dbURL, env)
	key, input := apitest.NewKey(), apitest.WithPaymentMethod("pm_card_visa")
	responses := apitest.Storm(t, []*apitest.Server{a, b}, 100, key, input)
	succeeded := 0
	for _, r := range responses {
		require.Empty(t, r.Errors)
		if r.Data.ChargeCard.Status == "SUCCEEDED" {
			succeeded++
		}
	}
	require.Positive(t, succeeded)
	require.Len(t, fake.ClientIntents(key), 1)
}
