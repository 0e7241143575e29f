package stripe

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/internal/testlog"
	"chargeonce/payment"
	"chargeonce/provider/providertest"
	"chargeonce/provider/stripe/stripefake"
)

type bundle struct {
	fake     *stripefake.Server
	provider *Provider
	logs     *syncBuffer
}

// setup starts a fake Stripe and a Provider that talks to it.
func setup(t *testing.T) *bundle {
	t.Helper()
	fake := stripefake.New("")
	t.Cleanup(fake.Close)
	logs := &syncBuffer{}
	p := New(Config{SecretKey: fake.SecretKey, APIBase: fake.URL, Timeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return &bundle{fake: fake, provider: p, logs: logs}
}

// request is the charge request of a fresh attempt, as payment makes it.
var request = providertest.Request

// creates are the create requests the fake received.
func (b *bundle) creates() []stripefake.Call {
	var out []stripefake.Call
	for _, c := range b.fake.Calls() {
		if c.Method == http.MethodPost && c.Path == "/v1/payment_intents" {
			out = append(out, c)
		}
	}
	return out
}

func TestCreateCharge_Succeeded_CreatesAndConfirmsOnePaymentIntentUnderOurKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := request("pm_card_visa", 1999, "USD")
	pc, err := b.provider.CreateCharge(context.Background(), req)
	require.NoError(t, err)
	require.True(t, pc.Succeeded)
	require.True(t, strings.HasPrefix(pc.ID, "pi_"), "the PaymentIntent id is the provider charge id: %s", pc.ID)

	creates := b.creates()
	require.Len(t, creates, 1, "create and confirm in one call")
	c := creates[0]
	require.Equal(t, req.IdempotencyKey, c.IdempotencyKey, "our provider key is Stripe's Idempotency-Key")
	require.Equal(t, "1999", c.Form.Get("amount"))
	require.Equal(t, "usd", c.Form.Get("currency"), "currency in lower case")
	require.Equal(t, "pm_card_visa", c.Form.Get("payment_method"))
	require.Equal(t, "true", c.Form.Get("confirm"))
	require.Equal(t, "card", c.Form.Get("payment_method_types[0]"))
	require.Equal(t, "Order 42", c.Form.Get("description"))
	require.Equal(t, req.AttemptID.String(), c.Form.Get("metadata[chargeonce_attempt_id]"))
	require.Equal(t, req.Metadata["client_idempotency_key"], c.Form.Get("metadata[client_idempotency_key]"))
	require.Equal(t, "demo", c.Form.Get("metadata[merchant]"))
	require.Equal(t, "order-42", c.Form.Get("metadata[order_id]"))

	intents := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())
	require.Len(t, intents, 1)
	require.Equal(t, pc.ID, intents[0].ID)
	require.Equal(t, "succeeded", intents[0].Status)

	found, err := b.provider.FindCharges(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []payment.ProviderCharge{pc}, found, "the lookup by attempt finds the same PaymentIntent")
}

func TestCreateCharge_CardErrors_FailWithTheDeclineCodeAndAFixedMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		pm, code, message string
	}{
		// generic_decline says nothing more than card_declined.
		{"pm_card_chargeDeclined", "card_declined", "The card was declined."},
		{"pm_card_chargeDeclinedInsufficientFunds", "insufficient_funds", "The card has insufficient funds."},
		// No decline_code: Stripe's code.
		{"pm_card_chargeDeclinedExpiredCard", "expired_card", "The card has expired."},
	}
	for _, tt := range tests {
		req := request(tt.pm, 1999, "EUR")
		pc, err := b.provider.CreateCharge(context.Background(), req)
		require.NoError(t, err, tt.pm)
		require.False(t, pc.Succeeded, tt.pm)
		require.Equal(t, tt.code, pc.FailureCode, tt.pm)
		require.Equal(t, tt.message, pc.FailureMessage, "a fixed message, never Stripe's text")
		require.NotEmpty(t, pc.ID, "the declined PaymentIntent")

		found, err := b.provider.FindCharges(context.Background(), req)
		require.NoError(t, err, tt.pm)
		require.Len(t, found, 1, tt.pm)
		require.Equal(t, tt.code, found[0].FailureCode, "the lookup reads the PaymentIntent's last_payment_error")
	}
}

func TestDeclined_UndisclosedReasonsAreACardDecline(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"fraudulent", "stolen_card", "lost_card", "pickup_card"} {
		pc := declined("pi_1", &stripego.Error{Type: stripego.ErrorTypeCard, Code: stripego.ErrorCodeCardDeclined, DeclineCode: stripego.DeclineCode(code)})
		require.Equal(t, "card_declined", pc.FailureCode, code)
	}
}

func TestCreateCharge_RequiresAction_FailsAndCancelsThePaymentIntent(t *testing.T) {
	t.Parallel()
	for _, pm := range []string{"pm_card_authenticationRequired", "pm_card_threeDSecure2Required"} {
		b := setup(t)
		req := request(pm, 1999, "EUR")
		pc, err := b.provider.CreateCharge(context.Background(), req)
		require.NoError(t, err, pm)
		require.False(t, pc.Succeeded)
		require.Equal(t, "authentication_required", pc.FailureCode)
		require.Contains(t, pc.FailureMessage, "requires authentication (3-D Secure), which this checkout cannot perform")

		intents := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())
		require.Len(t, intents, 1)
		require.Equal(t, "canceled", intents[0].Status, "cancelled at Stripe, so it can never be completed later")
		var cancels []stripefake.Call
		for _, c := range b.fake.Calls() {
			if c.Path == "/v1/payment_intents/"+intents[0].ID+"/cancel" {
				cancels = append(cancels, c)
			}
		}
		require.Len(t, cancels, 1)
		require.Equal(t, req.IdempotencyKey+"_cancel", cancels[0].IdempotencyKey, "a key derived from ours")
		require.Equal(t, "abandoned", cancels[0].Form.Get("cancellation_reason"))

		// The reconciler, after a crash between the cancel and the record,
		// learns the same outcome.
		found, err := b.provider.FindCharges(context.Background(), req)
		require.NoError(t, err)
		require.Len(t, found, 1)
		require.Equal(t, "authentication_required", found[0].FailureCode)
	}
}

func TestCreateCharge_RequiresAction_CancelLost_StaysUnknownUntilCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fake.Script(func(c stripefake.Call) stripefake.Fault {
		if strings.HasSuffix(c.Path, "/cancel") {
			return stripefake.Unavailable
		}
		return stripefake.None
	})
	req := request("pm_card_authenticationRequired", 1999, "EUR")
	_, err := b.provider.CreateCharge(context.Background(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "not FAILED while the PaymentIntent could still be completed")

	b.fake.Script(nil)
	found, err := b.provider.FindCharges(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, "authentication_required", found[0].FailureCode, "the lookup cancels it, then fails the attempt")
	require.Equal(t, "canceled", b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())[0].Status)
}

func TestCreateCharge_RequiresAction_CancelRefused_FailsAllTheSame(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fake.Script(func(c stripefake.Call) stripefake.Fault {
		if strings.HasSuffix(c.Path, "/cancel") {
			return stripefake.NotFound
		}
		return stripefake.None
	})
	req := request("pm_card_threeDSecure2Required", 1999, "EUR")
	pc, err := b.provider.CreateCharge(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "authentication_required", pc.FailureCode, "it cannot be completed without its client secret")
	require.Contains(t, b.logs.String(), "Stripe refused to cancel")
}

func TestCreateCharge_Processing_StaysUnknownUntilFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := request("pm_card_processing", 1999, "EUR")
	_, err := b.provider.CreateCharge(context.Background(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	_, err = b.provider.FindCharges(context.Background(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "still processing")

	pi := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())[0]
	b.fake.SetStatus(pi.ID, "succeeded")
	found, err := b.provider.FindCharges(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []payment.ProviderCharge{{ID: pi.ID, Succeeded: true}}, found)
}

// faultsWithoutAnswer are the answers, by name, that leave a send's
// outcome unknown.
var faultsWithoutAnswer = map[string]stripefake.Fault{
	"409 idempotency_key_in_use": stripefake.InUse,
	"429":                        stripefake.RateLimited,
	"503":                        stripefake.Unavailable,
	"500":                        stripefake.Error500,
	"timeout":                    stripefake.Slow,
	"connection cut":             stripefake.CutAfterRun,
}

// eachFaultWithoutAnswer runs run as a subtest per fault of
// faultsWithoutAnswer, on a fresh bundle, with p a provider whose timeout
// ends before the fake's slow answer.
func eachFaultWithoutAnswer(t *testing.T, run func(t *testing.T, b *bundle, p *Provider, fault stripefake.Fault)) {
	for name, fault := range faultsWithoutAnswer {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.fake.SlowDelay = 3 * time.Second
			run(t, b, New(Config{SecretKey: b.fake.SecretKey, APIBase: b.fake.URL, Timeout: time.Second}), fault)
		})
	}
}

func TestCreateCharge_NoDefinitiveAnswer_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	eachFaultWithoutAnswer(t, func(t *testing.T, b *bundle, p *Provider, fault stripefake.Fault) {
		b.fake.FailCreates(fault, 1)
		_, err := p.CreateCharge(context.Background(), request("pm_card_visa", 1999, "USD"))
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		require.Len(t, b.creates(), 1, "stripe-go does not retry on its own")
	})
	t.Run("network down", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.fake.Close()
		_, err := b.provider.CreateCharge(context.Background(), request("pm_card_visa", 1999, "USD"))
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	})
}

func TestCreateCharge_LostResponse_ResendWithTheSameKeyGetsTheSavedResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fake.FailCreates(stripefake.CutAfterRun, 1)
	req := request("pm_card_visa", 1999, "USD")
	_, err := b.provider.CreateCharge(context.Background(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "Stripe charged, the answer was lost")

	pc, err := b.provider.CreateCharge(context.Background(), req)
	require.NoError(t, err)
	require.True(t, pc.Succeeded)
	creates := b.creates()
	require.Len(t, creates, 2)
	require.Equal(t, req.IdempotencyKey, creates[0].IdempotencyKey)
	require.Equal(t, req.IdempotencyKey, creates[1].IdempotencyKey, "the re-send carries the same key")
	require.True(t, creates[1].Replayed, "Stripe's saved result, not a second charge")
	intents := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())
	require.Len(t, intents, 1, "one PaymentIntent")
	require.Equal(t, intents[0].ID, pc.ID)
}

func TestCreateCharge_SavedDeclineIsReplayed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := request("pm_card_chargeDeclinedInsufficientFunds", 1999, "USD")
	first, err := b.provider.CreateCharge(context.Background(), req)
	require.NoError(t, err)
	again, err := b.provider.CreateCharge(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.True(t, b.creates()[1].Replayed)
	require.Len(t, b.fake.Intents(), 1)
}

func TestCreateCharge_IdempotencyError_LogsAnErrorAndNeverUsesANewKey(t *testing.T) {
	t.Parallel()
	t.Run("Stripe holds nothing for the attempt: FAILED", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.fake.FailCreates(stripefake.Error500, 1) // the first send saved a 500 and made nothing
		req := request("pm_card_visa", 1999, "USD")
		_, err := b.provider.CreateCharge(context.Background(), req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)

		changed := req
		changed.Amount = 2999 // a bug, or a deploy that changed the request
		pc, err := b.provider.CreateCharge(context.Background(), changed)
		require.NoError(t, err)
		require.Equal(t, "provider_idempotency_error", pc.FailureCode)
		require.Contains(t, b.logs.String(), "level=ERROR")
		require.Contains(t, b.logs.String(), "first sent with other parameters")
		for _, c := range b.creates() {
			require.Equal(t, req.IdempotencyKey, c.IdempotencyKey, "never a new key")
		}
		require.Empty(t, b.fake.Intents())
	})
	t.Run("the first send charged: its PaymentIntent decides", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := request("pm_card_visa", 1999, "USD")
		first, err := b.provider.CreateCharge(context.Background(), req)
		require.NoError(t, err)
		changed := req
		changed.Description = "changed"
		pc, err := b.provider.CreateCharge(context.Background(), changed)
		require.NoError(t, err)
		require.Equal(t, first, pc, "the money moved: the attempt succeeded, whatever the second send said")
		require.Contains(t, b.logs.String(), "level=ERROR")
		require.Len(t, b.fake.Intents(), 1)
	})
}

func TestCreateCharge_Replayed500_LooksUpThenSpendsTheKeyOnlyWhenStripeHoldsNothing(t *testing.T) {
	t.Parallel()
	t.Run("nothing held: key spent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.fake.FailCreates(stripefake.Error500, 1)
		req := request("pm_card_visa", 1999, "USD")
		_, err := b.provider.CreateCharge(context.Background(), req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "a first 500 may still be anything")
		require.NotErrorIs(t, err, payment.ErrProviderKeySpent)

		_, err = b.provider.CreateCharge(context.Background(), req)
		require.ErrorIs(t, err, payment.ErrProviderKeySpent, "the replayed 500, and no PaymentIntent for the attempt")
		require.NotErrorIs(t, err, payment.ErrOutcomeUnknown)
		require.True(t, b.creates()[1].Replayed)
		var listed bool
		for _, c := range b.fake.Calls() {
			listed = listed || (c.Method == http.MethodGet && c.Path == "/v1/payment_intents")
		}
		require.True(t, listed, "Stripe was asked for the attempt's PaymentIntent")
	})
	t.Run("a PaymentIntent was created but never confirmed: it is confirmed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.fake.FailCreates(stripefake.Error500AfterCreate, 1)
		req := request("pm_card_visa", 1999, "USD")
		_, err := b.provider.CreateCharge(context.Background(), req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		found, err := b.provider.FindCharges(context.Background(), req)
		require.NoError(t, err)
		require.Empty(t, found, "an unconfirmed PaymentIntent holds no charge")

		pc, err := b.provider.CreateCharge(context.Background(), req)
		require.NoError(t, err)
		require.True(t, pc.Succeeded)
		intents := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())
		require.Len(t, intents, 1, "the one PaymentIntent, completed; no second")
		require.Equal(t, intents[0].ID, pc.ID)
		var confirms []stripefake.Call
		for _, c := range b.fake.Calls() {
			if strings.HasSuffix(c.Path, "/confirm") {
				confirms = append(confirms, c)
			}
		}
		require.Len(t, confirms, 1)
		require.Equal(t, req.IdempotencyKey+"_confirm", confirms[0].IdempotencyKey)
	})
}

func TestCreateCharge_RequestStripeRefuses_Fails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc, err := b.provider.CreateCharge(context.Background(), request("card_unknown", 1999, "USD"))
	require.NoError(t, err)
	require.Equal(t, "invalid_payment_method", pc.FailureCode)
	require.Contains(t, b.logs.String(), "Stripe refused the charge request as invalid")
}

func TestCreateCharge_WrongSecretKey_IsAnErrorThatNeverQuotesTheKey(t *testing.T) {
	t.Parallel()
	fake := stripefake.New("")
	t.Cleanup(fake.Close)
	logs := &syncBuffer{}
	const wrong = "sk_test_wrongkey1234567890abcdefgh"
	p := New(Config{SecretKey: wrong, APIBase: fake.URL, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	req := request("pm_card_visa", 1999, "USD")
	_, err := p.CreateCharge(context.Background(), req)
	require.Error(t, err)
	require.NotErrorIs(t, err, payment.ErrOutcomeUnknown, "nothing was charged; an operator must fix the key")
	require.Contains(t, err.Error(), "401")
	_, findErr := p.FindCharges(context.Background(), req)
	require.Error(t, findErr)
	// The fake quotes the key it was sent in its answer (Stripe masks it):
	// none of that reaches an error or a log line.
	for _, text := range []string{err.Error(), findErr.Error(), logs.String()} {
		require.NotContains(t, text, wrong)
		require.NotContains(t, text, "wrongkey")
	}
	require.Contains(t, logs.String(), "STRIPE_SECRET_KEY", "the log says what to fix")

	fake.Close()
	_, err = p.CreateCharge(context.Background(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
	require.NotContains(t, err.Error(), wrong)
}

func TestStripeAmount_ConvertsWhereExactAndRefusesWhereNot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		currency   string
		amount     int64
		wantStripe int64  // 0: refused, nothing sent
		wantCode   string // the failure code when refused
	}{
		{"USD", 1999, 1999, ""},
		{"EUR", 50, 50, ""},
		{"JPY", 500, 500, ""}, // zero-decimal in both
		{"KRW", 10000, 10000, ""},
		{"VND", 25000, 25000, ""},
		{"CLP", 990, 990, ""},
		{"ISK", 500, 50000, ""}, // zero-decimal in ISO, two-decimal at Stripe
		{"UGX", 500, 50000, ""},
		{"MGA", 19900, 199, ""}, // two-decimal in ISO, zero-decimal at Stripe
		{"MGA", 19999, 0, "amount_not_supported"},
		{"KWD", 1230, 1230, ""}, // three decimals, the last one 0
		{"KWD", 1234, 0, "amount_not_supported"},
		{"BHD", 5005, 0, "amount_not_supported"},
		{"JOD", 5000, 5000, ""},
		{"OMR", 100, 100, ""},
		{"TND", 999, 0, "amount_not_supported"},
		{"IQD", 5000, 0, "currency_not_supported"}, // three decimals in ISO, not at Stripe
		{"HUF", 1999, 1999, ""},                    // two-decimal charges; whole units only for payouts
		{"TWD", 1999, 1999, ""},
	}
	for _, tt := range tests {
		before := len(b.creates())
		req := request("pm_card_visa", tt.amount, tt.currency)
		pc, err := b.provider.CreateCharge(context.Background(), req)
		require.NoError(t, err, "%s %d", tt.currency, tt.amount)
		creates := b.creates()
		if tt.wantStripe == 0 {
			require.False(t, pc.Succeeded)
			require.Equal(t, tt.wantCode, pc.FailureCode, "%s %d", tt.currency, tt.amount)
			require.Contains(t, pc.FailureMessage, "The card was not charged")
			require.Len(t, creates, before, "%s %d: refused before anything is sent, never rounded", tt.currency, tt.amount)
			continue
		}
		require.True(t, pc.Succeeded, "%s %d", tt.currency, tt.amount)
		require.Len(t, creates, before+1)
		last := creates[len(creates)-1]
		require.Equal(t, strings.ToLower(tt.currency), last.Form.Get("currency"))
		require.Equal(t, tt.wantStripe, mustInt(t, last.Form.Get("amount")), "%s %d", tt.currency, tt.amount)
	}
	_, refusal, _ := stripeAmount(1234, "KWD")
	require.Contains(t, refusal.FailureMessage, "1.234 KWD")
	_, refusal, _ = stripeAmount(19999, "MGA")
	require.Contains(t, refusal.FailureMessage, "199.99 MGA")
}

func TestFindCharges_PagesThroughOtherPaymentIntents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	target := request("pm_card_chargeDeclined", 700, "USD")
	_, err := b.provider.CreateCharge(ctx, target)
	require.NoError(t, err)
	// Newer PaymentIntents of other attempts: the target is three pages down.
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range 10 {
		wg.Go(func() {
			for range 23 {
				if _, errs[i] = b.provider.CreateCharge(ctx, request("pm_card_visa", 100, "USD")); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	found, err := b.provider.FindCharges(ctx, target)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, "card_declined", found[0].FailureCode)

	none, err := b.provider.FindCharges(ctx, request("pm_card_visa", 100, "USD"))
	require.NoError(t, err)
	require.Empty(t, none, "an attempt Stripe never saw: none, after listing every page")
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		require.True(t, c >= '0' && c <= '9', s)
		n = n*10 + int64(c-'0')
	}
	return n
}

// syncBuffer is the log sink the tests read while servers write it.
type syncBuffer = testlog.Buffer

func TestFindCharges_TwoSucceededForOneAttempt_BothFound_AndLogged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := request("pm_card_visa", 1500, "USD")
	first, err := b.provider.CreateCharge(ctx, req)
	require.NoError(t, err)
	// A stray send of the same attempt under another key.
	stray := req
	stray.IdempotencyKey += "_stray"
	second, err := b.provider.CreateCharge(ctx, stray)
	require.NoError(t, err)
	require.NotEqual(t, first.ID, second.ID)

	found, err := b.provider.FindCharges(ctx, req)
	require.NoError(t, err)
	require.Equal(t, []payment.ProviderCharge{first, second}, found, "both, oldest first: payment settles on one and refunds the other")
	require.Contains(t, b.logs.String(), "Stripe holds several PaymentIntents for one attempt")
}
