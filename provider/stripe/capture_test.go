package stripe

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
	"chargeonce/provider/providertest"
	"chargeonce/provider/stripe/stripefake"
)

var (
	captureRequest = providertest.CaptureRequest
	voidRequest    = providertest.VoidRequest
)

// authorized authorizes amount of currency on a card that succeeds, and
// requires an open authorization.
func (b *bundle) authorized(t *testing.T, amount int64, currency string) payment.ProviderCharge {
	t.Helper()
	pc, err := b.provider.CreateCharge(context.Background(), providertest.ManualRequest("pm_card_visa", amount, currency))
	require.NoError(t, err)
	require.True(t, pc.Succeeded, "%+v", pc)
	require.NotNil(t, pc.Authorization, "%+v", pc)
	require.Equal(t, payment.AuthorizationOpen, pc.Authorization.State)
	return pc
}

// captured sends req and requires that it succeeded.
func (b *bundle) captured(t *testing.T, req payment.ProviderCaptureRequest) payment.ProviderCapture {
	t.Helper()
	c, err := b.provider.CaptureCharge(context.Background(), req)
	require.NoError(t, err)
	require.True(t, c.Succeeded, "%+v", c)
	return c
}

// refusedCapture sends req and requires a refusal with code and one of the
// fixed messages.
func (b *bundle) refusedCapture(t *testing.T, req payment.ProviderCaptureRequest, code string) {
	t.Helper()
	c, err := b.provider.CaptureCharge(context.Background(), req)
	require.NoError(t, err, "a refusal is an answer")
	require.False(t, c.Succeeded, "%+v", c)
	require.Equal(t, code, c.FailureCode, "%+v", c)
	require.Contains(t, c.FailureMessage, "Nothing was captured.", "a fixed message, not Stripe's text")
}

// readAuthorization requires the authorization id in state with its amounts.
func (b *bundle) readAuthorization(t *testing.T, id string, state payment.AuthorizationState, amount, captured int64) {
	t.Helper()
	pa, err := b.provider.ReadAuthorization(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, state, pa.State, "%+v", pa)
	require.Equal(t, amount, pa.Amount, "authorized")
	require.Equal(t, captured, pa.Captured, "captured")
}

func TestCreateCharge_Manual_AuthorizesCapturableInParts_UntilItsCaptureBefore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := providertest.ManualRequest("pm_card_visa", 1999, "USD")
	pc, err := b.provider.CreateCharge(context.Background(), req)
	require.NoError(t, err)
	intent := b.fake.IntentsFor(MetadataAttemptID, req.AttemptID.String())[0]
	require.Equal(t, "requires_capture", intent.Status)
	require.Equal(t, "available", intent.Multicapture)
	require.Equal(t, payment.ProviderCharge{ID: intent.ID, Succeeded: true, Authorization: &payment.ProviderAuthorization{
		State: payment.AuthorizationOpen, Amount: 1999, ExpiresAt: intent.CaptureBefore,
	}}, pc, "an open authorization until the charge's capture_before")
	require.WithinDuration(t, time.Now().Add(stripefake.AuthorizationWindow), pc.Authorization.ExpiresAt, time.Minute)

	create := b.creates()[0]
	require.Equal(t, "manual", create.Form.Get("capture_method"))
	require.Equal(t, "if_available", create.Form.Get("payment_method_options[card][request_multicapture]"), "split shipments where Stripe allows it")
	require.Equal(t, "latest_charge", create.Form.Get("expand[0]"))

	found, err := b.provider.FindCharges(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []payment.ProviderCharge{pc}, found)

	// An automatic charge's request is as it was before authorizations, so
	// that a key sent before them is still its repeat.
	b.charged(t, "pm_card_visa", 1999, "USD")
	automatic := b.creates()[1]
	for _, param := range []string{"capture_method", "payment_method_options[card][request_multicapture]", "expand[0]"} {
		require.False(t, automatic.Form.Has(param), param)
	}
}

func TestCreateCharge_Manual_AuthenticatedThenFound_IsAnAuthorization(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := authRequest("pm_card_authenticationRequired")
	req.CaptureMethod = payment.CaptureManual
	id := b.waiting(t, req)
	require.NoError(t, b.fake.CompleteAuthentication(id))
	found, err := b.provider.FindCharges(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.True(t, found[0].Succeeded)
	require.NotNil(t, found[0].Authorization, "authorized, not captured")
	require.Equal(t, payment.AuthorizationOpen, found[0].Authorization.State)
	require.Equal(t, int64(1999), found[0].Authorization.Amount)
}

func TestCaptureCharge_PartThenFinal_EachUnderItsKeyWithItsMark(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 1000, "USD")
	part, final := captureRequest(pc.ID, 400, "USD", false), captureRequest(pc.ID, 300, "USD", true)
	require.Equal(t, payment.ProviderCapture{ID: pc.ID + ":capture:" + part.AttemptID.String(), Succeeded: true}, b.captured(t, part))
	b.readAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 400)
	b.captured(t, final)
	b.readAuthorization(t, pc.ID, payment.AuthorizationCaptured, 1000, 700)

	posts := b.callsTo("/capture")
	require.Len(t, posts, 2)
	require.Equal(t, part.IdempotencyKey, posts[0].IdempotencyKey, "our provider key is Stripe's Idempotency-Key")
	require.Equal(t, "400", posts[0].Form.Get("amount_to_capture"))
	require.Equal(t, "false", posts[0].Form.Get("final_capture"), "the rest is kept for the next capture")
	require.Equal(t, "400", posts[0].Form.Get("metadata[cap_"+part.AttemptID.String()+"]"), "the capture's mark, written with it")
	require.Equal(t, final.IdempotencyKey, posts[1].IdempotencyKey)
	require.Equal(t, "300", posts[1].Form.Get("amount_to_capture"))
	require.False(t, posts[1].Form.Has("final_capture"), "final by default: the rest is released")
	require.Equal(t, "300 final", posts[1].Form.Get("metadata[cap_"+final.AttemptID.String()+"]"))
	for _, post := range posts {
		n := 0
		for k := range post.Form {
			if strings.HasPrefix(k, "metadata[") {
				n++
			}
		}
		require.Equal(t, 1, n, "only the mark: the PaymentIntent keeps naming the charge's attempt")
	}

	intent := b.fake.Intents()[0]
	require.Equal(t, []stripefake.Capture{{Amount: 400, IdempotencyKey: part.IdempotencyKey}, {Amount: 300, Final: true, IdempotencyKey: final.IdempotencyKey}},
		b.fake.Captures(intent.ID))
	require.Equal(t, "succeeded", intent.Status)
	require.NotEqual(t, part.AttemptID.String(), intent.Metadata[MetadataAttemptID], "the charge's attempt, not a capture's")
}

func TestCaptureCharge_WithoutMulticapture_APartNotFinalIsRefusedUnsent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fake.SetMulticapture(false)
	pc := b.authorized(t, 1000, "USD")
	require.Equal(t, "unavailable", b.fake.Intents()[0].Multicapture)

	c, err := b.provider.CaptureCharge(context.Background(), captureRequest(pc.ID, 400, "USD", false))
	require.NoError(t, err)
	require.Equal(t, payment.FailureChargeNotCapturable, c.FailureCode)
	require.Contains(t, c.FailureMessage, "multicapture is not available")
	require.Empty(t, b.callsTo("/capture"), "never sent: Stripe would release the other 600")
	b.readAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 0)

	// A final part releases the rest, as it says; no final_capture is sent,
	// which Stripe takes only with multicapture.
	b.captured(t, captureRequest(pc.ID, 400, "USD", true))
	require.False(t, b.callsTo("/capture")[0].Form.Has("final_capture"))
	b.readAuthorization(t, pc.ID, payment.AuthorizationCaptured, 1000, 400)

	// All that remains, final or not, is one capture that releases nothing.
	whole := b.authorized(t, 1000, "USD")
	b.captured(t, captureRequest(whole.ID, 1000, "USD", false))
	b.readAuthorization(t, whole.ID, payment.AuthorizationCaptured, 1000, 1000)
}

func TestCaptureCharge_LostAnswer_FoundByItsMark_NeverSentAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 1000, "USD")
	req := captureRequest(pc.ID, 400, "USD", false)
	b.fake.FailCaptures(stripefake.CutAfterRun, 1)
	_, err := b.provider.CaptureCharge(context.Background(), req)
	require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "Stripe captured, the answer was lost")

	found, err := b.provider.FindCapture(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, &payment.ProviderCapture{ID: pc.ID + ":capture:" + req.AttemptID.String(), Succeeded: true}, found)
	again := b.captured(t, req)
	require.Equal(t, *found, again)
	require.Len(t, b.callsTo("/capture"), 1, "the mark answers: never sent again")
	require.Len(t, b.fake.Captures(pc.ID), 1)
}

func TestCaptureCharge_KeyForgotten_TheMarkKeepsItOneCapture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 1000, "USD")
	req := captureRequest(pc.ID, 400, "USD", false)
	first := b.captured(t, req)
	b.fake.ForgetKeys() // 24 hours later: a send would capture another 400
	require.Equal(t, first, b.captured(t, req))
	require.Len(t, b.fake.Captures(pc.ID), 1)
	b.readAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 400)
}

func TestFindCapture_NeverSends(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 1000, "USD")
	req := captureRequest(pc.ID, 400, "USD", false)
	found, err := b.provider.FindCapture(context.Background(), req)
	require.NoError(t, err)
	require.Nil(t, found)
	require.Empty(t, b.callsTo("/capture"))
	// Another attempt's capture is not this one's.
	b.captured(t, captureRequest(pc.ID, 100, "USD", false))
	found, err = b.provider.FindCapture(context.Background(), req)
	require.NoError(t, err)
	require.Nil(t, found)
}

func TestCaptureCharge_NoDefinitiveAnswer_IsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	eachFaultWithoutAnswer(t, func(t *testing.T, b *bundle, p *Provider, fault stripefake.Fault) {
		pc := b.authorized(t, 1000, "USD")
		b.fake.FailCaptures(fault, 1)
		_, err := p.CaptureCharge(context.Background(), captureRequest(pc.ID, 400, "USD", false))
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		require.Len(t, b.callsTo("/capture"), 1)
	})
}

func TestCaptureCharge_Replayed500_SpendsTheKeyOnlyWhenNothingWasCaptured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("nothing captured", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pc := b.authorized(t, 1000, "USD")
		req := captureRequest(pc.ID, 400, "USD", false)
		b.fake.FailCaptures(stripefake.Error500, 1)
		_, err := b.provider.CaptureCharge(ctx, req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown, "a first 500 may have captured")
		_, err = b.provider.CaptureCharge(ctx, req)
		require.ErrorIs(t, err, payment.ErrProviderKeySpent, "replayed, and no mark: no send under this key can capture")
		require.Empty(t, b.fake.Captures(pc.ID))
	})
	t.Run("captured", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pc := b.authorized(t, 1000, "USD")
		req := captureRequest(pc.ID, 400, "USD", false)
		b.fake.FailCaptures(stripefake.Error500AfterCreate, 1)
		_, err := b.provider.CaptureCharge(ctx, req)
		require.ErrorIs(t, err, payment.ErrOutcomeUnknown)
		// Sent again as it was (the mark read before it said nothing yet):
		// the replayed 500 is read against the mark.
		c, err := b.provider.sendCapture(ctx, req, pc.ID, captureParams(req, 400, true))
		require.NoError(t, err)
		require.True(t, c.Succeeded, "the mark says the capture was made")
		require.True(t, b.callsTo("/capture")[1].Replayed)
		require.Len(t, b.fake.Captures(pc.ID), 1)
	})
}

func TestCaptureCharge_Refusals_AreAnswersWithFixedMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := map[string]struct {
		code    string
		arrange func(t *testing.T, b *bundle) string // returns the charge to capture
	}{
		"voided": {payment.FailureChargeVoided, func(t *testing.T, b *bundle) string {
			pc := b.authorized(t, 1000, "USD")
			_, err := b.provider.VoidCharge(ctx, voidRequest(pc.ID))
			require.NoError(t, err)
			return pc.ID
		}},
		"lapsed": {payment.FailureAuthorizationExpired, func(t *testing.T, b *bundle) string {
			pc := b.authorized(t, 1000, "USD")
			require.NoError(t, b.fake.ExpireAuthorization(pc.ID))
			return pc.ID
		}},
		"lapsed after a part": {payment.FailureAuthorizationExpired, func(t *testing.T, b *bundle) string {
			pc := b.authorized(t, 1000, "USD")
			b.captured(t, captureRequest(pc.ID, 400, "USD", false))
			require.NoError(t, b.fake.ExpireAuthorization(pc.ID))
			return pc.ID
		}},
		"captured in full": {payment.FailureChargeNotCapturable, func(t *testing.T, b *bundle) string {
			pc := b.authorized(t, 1000, "USD")
			b.captured(t, captureRequest(pc.ID, 1000, "USD", true))
			return pc.ID
		}},
		"final capture made": {payment.FailureChargeNotCapturable, func(t *testing.T, b *bundle) string {
			pc := b.authorized(t, 1000, "USD")
			b.captured(t, captureRequest(pc.ID, 100, "USD", true))
			return pc.ID
		}},
		"an automatic charge": {payment.FailureChargeNotCapturable, func(t *testing.T, b *bundle) string {
			return b.charged(t, "pm_card_visa", 1000, "USD").ID
		}},
		"more than is capturable": {payment.FailureCaptureExceedsAuthorization, func(t *testing.T, b *bundle) string {
			pc := b.authorized(t, 1000, "USD")
			b.captured(t, captureRequest(pc.ID, 900, "USD", false))
			return pc.ID
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			id := tt.arrange(t, b)
			before := len(b.fake.Captures(id))
			b.refusedCapture(t, captureRequest(id, 200, "USD", true), tt.code)
			require.Len(t, b.fake.Captures(id), before, "nothing captured")
			require.NotContains(t, b.logs.String(), "You cannot", "Stripe's text is never passed on")
		})
	}
}

func TestCaptureRefused_MapsStripesCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	open := &stripego.PaymentIntent{ID: "pi_1", Status: stripego.PaymentIntentStatusRequiresCapture, Amount: 1000}
	req := captureRequest("pi_1", 400, "USD", false)
	for code, want := range map[stripego.ErrorCode]string{
		stripego.ErrorCodeAmountTooLarge:               payment.FailureCaptureExceedsAuthorization,
		stripego.ErrorCodeChargeExpiredForCapture:      payment.FailureAuthorizationExpired,
		stripego.ErrorCodePaymentIntentUnexpectedState: CodeProviderRejected, // refused while it was not open; it is again
		stripego.ErrorCodeParameterInvalidInteger:      CodeProviderRejected,
	} {
		c := b.provider.captureRefused(context.Background(), req, &stripego.Error{Code: code, HTTPStatusCode: 400}, open)
		require.Equal(t, want, c.FailureCode, code)
		require.Equal(t, captureMessages[want], c.FailureMessage, code)
	}
	c := b.provider.captureRefused(context.Background(), req, &stripego.Error{Type: stripego.ErrorTypeCard, HTTPStatusCode: 402,
		Code: stripego.ErrorCodeCardDeclined, DeclineCode: stripego.DeclineCodeInsufficientFunds, Msg: "Your card has insufficient funds."}, open)
	require.Equal(t, payment.ProviderCapture{FailureCode: "insufficient_funds", FailureMessage: "The card provider declined the capture. Nothing was captured."}, c,
		"a decline keeps the card's code, with a fixed message")
}

func TestCaptureCharge_IdempotencyError_IsAnErrorNotARefusal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 1000, "USD")
	first := captureRequest(pc.ID, 400, "USD", false)
	b.captured(t, first)
	other := captureRequest(pc.ID, 300, "USD", false)
	other.IdempotencyKey = first.IdempotencyKey // a bug: one key, two requests
	c, err := b.provider.CaptureCharge(context.Background(), other)
	require.Error(t, err, "never a refusal on a guess")
	require.NotErrorIs(t, err, payment.ErrOutcomeUnknown)
	require.Empty(t, c.FailureCode)
	require.Contains(t, b.logs.String(), "first sent with other parameters")
	require.Len(t, b.fake.Captures(pc.ID), 1)
}

func TestCaptureCharge_SameKeyConcurrently_OneCapture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fake.SlowDelay = 100 * time.Millisecond
	b.fake.Script(func(c stripefake.Call) stripefake.Fault {
		if c.Method == "POST" {
			return stripefake.Slow // the sends overlap at Stripe
		}
		return stripefake.None
	})
	pc := b.authorized(t, 1000, "USD")
	req := captureRequest(pc.ID, 400, "USD", false)
	const n = 50
	answers, errs := make([]payment.ProviderCapture, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = b.provider.CaptureCharge(context.Background(), req)
		}()
	}
	wg.Wait()
	want := payment.ProviderCapture{ID: pc.ID + ":capture:" + req.AttemptID.String(), Succeeded: true}
	unknown := 0
	for i := range n {
		if errs[i] != nil {
			require.ErrorIs(t, errs[i], payment.ErrOutcomeUnknown, "a send of the key still runs (409)")
			unknown++
			continue
		}
		require.Equal(t, want, answers[i])
	}
	t.Logf("%d of %d sends were in use", unknown, n)
	require.Len(t, b.fake.Captures(pc.ID), 1, "one capture for %d sends of one key", n)
	b.readAuthorization(t, pc.ID, payment.AuthorizationOpen, 1000, 400)
}

func TestCaptureCharge_ManyKeysConcurrently_NeverMoreThanAuthorized(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 1000, "USD")
	const n = 20
	answers, errs := make([]payment.ProviderCapture, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = b.provider.CaptureCharge(context.Background(), captureRequest(pc.ID, 100, "USD", false))
		}()
	}
	wg.Wait()
	made := 0
	for i := range n {
		require.NoError(t, errs[i])
		if answers[i].Succeeded {
			made++
			continue
		}
		// Over what remains, or after the capture that took the last of it.
		require.Contains(t, []string{payment.FailureCaptureExceedsAuthorization, payment.FailureChargeNotCapturable}, answers[i].FailureCode)
	}
	require.Equal(t, 10, made)
	require.Len(t, b.fake.Captures(pc.ID), 10)
	b.readAuthorization(t, pc.ID, payment.AuthorizationCaptured, 1000, 1000)
}

func TestCaptureCharge_CurrencyStripeCountsOtherwise_ConvertedBothWays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 500, "ISK") // ISK 500, Stripe's 50000
	require.Equal(t, int64(500), pc.Authorization.Amount)
	require.Equal(t, "50000", b.creates()[0].Form.Get("amount"))
	b.captured(t, captureRequest(pc.ID, 200, "ISK", false))
	require.Equal(t, "20000", b.callsTo("/capture")[0].Form.Get("amount_to_capture"))
	b.readAuthorization(t, pc.ID, payment.AuthorizationOpen, 500, 200)

	mga := b.authorized(t, 19900, "MGA") // MGA 199.00: whole units at Stripe
	c, err := b.provider.CaptureCharge(context.Background(), captureRequest(mga.ID, 150, "MGA", false))
	require.NoError(t, err)
	require.Equal(t, CodeAmountNotSupported, c.FailureCode, "MGA 1.50 cannot be captured exactly")
	require.Len(t, b.callsTo("/capture"), 1, "refused unsent")
}

func TestCaptureCharge_NoAmount_IsAnErrorUnsent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pc := b.authorized(t, 1000, "USD")
	_, err := b.provider.CaptureCharge(context.Background(), captureRequest(pc.ID, 0, "USD", true))
	require.Error(t, err)
	require.False(t, errors.Is(err, payment.ErrOutcomeUnknown))
	require.Empty(t, b.callsTo("/capture"), "Stripe would capture all that is capturable")
}
