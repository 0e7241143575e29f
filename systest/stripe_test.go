package systest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/internal/apiclient"
	"chargeonce/provider/stripe"
	"chargeonce/provider/stripe/stripefake"
)

func TestStripe_Crash_KilledAtEachDangerousPoint_OnePaymentIntent(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	eachCrash(t, []crashCase{
		{"after-claim", "pm_card_visa", "SUCCEEDED"},
		{"after-provider", "pm_card_visa", "SUCCEEDED"},
		{"after-finalize", "pm_card_visa", "SUCCEEDED"},
		{"after-provider", "pm_card_chargeDeclined", "FAILED"},
		{"after-provider", "pm_card_authenticationRequired", "FAILED"},
	}, func(t *testing.T, tt crashCase, dbURL string) {
		// Stripe lives outside the process that dies: the crash takes
		// down chargeonce, not Stripe.
		fake := stripefake.Start(t)
		env := fake.Env(map[string]string{"DATABASE_URL": dbURL})
		key := chargeUntilCrash(t, env, tt)
		if tt.crashAt != "after-claim" {
			require.Len(t, fake.ClientIntents(key), 1, "Stripe answered before the crash")
		}

		// A new process (a restart, or another replica) settles the attempt.
		survivor := startServer(t, env)
		final := survivor.finalStatus(t, key, 20*time.Second)
		require.Equal(t, tt.wantStatus, final.Status)
		attemptID, providerKey := apitest.StoredProviderKey(t, dbURL, key)
		intents := fake.IntentsFor(stripe.MetadataAttemptID, attemptID)
		require.Len(t, intents, 1, "exactly one PaymentIntent for the attempt")
		require.Len(t, fake.ClientIntents(key), 1, "and for the client's key")
		require.Equal(t, providerKey, intents[0].IdempotencyKey, "under our one provider key")
		for _, k := range fake.CreateKeys() {
			require.Equal(t, providerKey, k)
		}
		if tt.wantStatus == "SUCCEEDED" {
			require.Equal(t, intents[0].ID, final.Charge.ProviderChargeId, "the stored result is Stripe's PaymentIntent")
		} else if tt.paymentMethod == "pm_card_authenticationRequired" {
			require.Equal(t, "authentication_required", final.Failure.Code)
			require.Equal(t, "canceled", intents[0].Status)
		} else {
			require.Equal(t, "card_declined", final.Failure.Code)
		}
		replay := survivor.chargeCard(t, apiclient.DemoAPIKey, key, withPaymentMethod(tt.paymentMethod))
		require.True(t, replay.Replayed)
		require.Equal(t, tt.wantStatus, replay.Status)
	})
}
