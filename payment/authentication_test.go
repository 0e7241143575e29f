package payment

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// The tests of customer authentication charge the provider's
// pm_card_authenticationRequired, which answers with its challenge; the
// shopper is this test pressing the challenge's buttons.

const authCard = "pm_card_authenticationRequired"

func authInput(returnURL string) ChargeInput {
	in := card(authCard)
	in.ReturnURL = returnURL
	return in
}

// shopper presses a button of the challenge at actionURL ("complete" or
// "fail") and returns where the provider sends the browser back.
func (b *bundle) shopper(t *testing.T, actionURL, button string) *url.URL {
	t.Helper()
	back, err := b.provider.PressChallenge(actionURL, button)
	require.NoError(t, err)
	return back
}

// providerCharge is the provider's charge of key, its only one, as it is
// now.
func (b *bundle) providerCharge(t *testing.T, key string) ProviderCharge {
	t.Helper()
	charges := b.provider.Charges("client_idempotency_key", key)
	require.Len(t, charges, 1)
	return charges[0]
}

// providerStatus is the provider's status of the charge of key, its only
// one.
func (b *bundle) providerStatus(t *testing.T, key string) string {
	t.Helper()
	return b.provider.ChargeStatus(b.providerCharge(t, key).ID)
}

func TestAuthentication_Complete_OneCharge_TheReturnOnlyReads(t *testing.T) {
	t.Parallel()
	b, provider := setupCounting(t, Config{})
	ctx := context.Background()
	in := authInput("https://shop.example/return?cart=7")

	first, err := b.svc.ChargeCard(ctx, b.merchant, "k", in)
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, first.Status)
	require.NotNil(t, first.NextAction, "the shopper must authenticate")
	require.Equal(t, NextActionRedirect, first.NextAction.Type)
	require.Equal(t, b.providerCharge(t, "k").Action.URL, first.NextAction.URL, "the provider's challenge")
	require.WithinDuration(t, b.clock.Now().Add(AuthenticationWindowDefault), first.NextAction.ExpiresAt, time.Second)
	require.Equal(t, 1, b.events(t, "k", EventChargeRequiresAction))

	// A retry while the shopper authenticates: the same next action, nothing sent.
	again, err := b.svc.ChargeCard(ctx, b.merchant, "k", in)
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, again.Status)
	require.Equal(t, first.NextAction, again.NextAction)
	require.Equal(t, first.NextAction, b.status(t, "k").NextAction)

	back := b.shopper(t, first.NextAction.URL, "complete")
	require.Equal(t, "shop.example", back.Host)
	require.Equal(t, "/return", back.Path)
	require.Equal(t, "7", back.Query().Get("cart"), "the merchant's own query is kept")
	require.Equal(t, "k", back.Query().Get(ReturnKeyParam), "the return names the attempt's key")

	// The page comes back and retries the key: the retry reads the provider.
	b.clock.Advance(AuthenticationRecheckDefault)
	done, err := b.svc.ChargeCard(ctx, b.merchant, "k", in)
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, done.Status)
	require.False(t, done.Replayed, "this request learned the outcome")
	require.Nil(t, done.NextAction)
	require.Equal(t, 1, b.providerCharges(t, "k"))

	// A double return, a reload, the back button: nothing more is charged.
	b.shopper(t, first.NextAction.URL, "complete")
	b.clock.Advance(AuthenticationRecheckDefault)
	replay, err := b.svc.ChargeCard(ctx, b.merchant, "k", in)
	require.NoError(t, err)
	require.True(t, replay.Replayed)
	require.Equal(t, done.Charge.ID, replay.Charge.ID)
	require.Equal(t, 1, b.providerCharges(t, "k"))
	require.Equal(t, int32(1), provider.creates.Load(), "sent once; every later answer was read")
	require.Equal(t, int32(0), provider.cancels.Load())
	require.Equal(t, 1, b.events(t, "k", EventChargeSucceeded))
	require.Equal(t, 1, b.events(t, "k", EventChargeRequiresAction))
}

func TestAuthentication_Fail_FailedAuthenticationFailed_NothingCharged(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	first, err := b.svc.ChargeCard(ctx, b.merchant, "k", authInput("https://shop.example/return"))
	require.NoError(t, err)
	require.NotNil(t, first.NextAction)

	b.shopper(t, first.NextAction.URL, "fail")
	b.clock.Advance(AuthenticationRecheckDefault)
	polled := b.status(t, "k") // a poll reads the provider too
	require.Equal(t, StatusFailed, polled.Status)
	require.Equal(t, FailureAuthenticationFailed, polled.Failure.Code)
	require.Nil(t, polled.NextAction)
	require.Equal(t, 0, b.providerCharges(t, "k"))
	require.Equal(t, 1, b.events(t, "k", EventChargeFailed))
}

func TestAuthentication_WithoutReturnURL_FailsAuthenticationRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r, err := b.svc.ChargeCard(context.Background(), b.merchant, "k", card(authCard))
	require.NoError(t, err)
	require.Equal(t, StatusFailed, r.Status)
	require.Equal(t, FailureAuthenticationRequired, r.Failure.Code)
	require.Nil(t, r.NextAction)
	require.Equal(t, 0, b.events(t, "k", EventChargeRequiresAction))
}

func TestAuthentication_Abandoned_CancelledAfterTheWindow_NeverSentAgain(t *testing.T) {
	t.Parallel()
	b, provider := setupCounting(t, Config{AuthenticationWindow: time.Minute})
	ctx := context.Background()
	rec := NewReconciler(b.svc, ReconcilerConfig{})
	first, err := b.svc.ChargeCard(ctx, b.merchant, "k", authInput("https://shop.example/return"))
	require.NoError(t, err)
	require.NotNil(t, first.NextAction)

	res, err := rec.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Taken, "checked at its own pace: not before AuthenticationCheckInterval")

	// Within the window, every look only reads: no redrive, ever, even past REDRIVE_WINDOW.
	for range 3 {
		b.clock.Advance(AuthenticationCheckIntervalDefault + time.Millisecond)
		res, err = rec.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, ReconcileResult{Taken: 1, Open: 1}, res)
	}
	require.Equal(t, StatusProcessing, b.status(t, "k").Status)
	require.Equal(t, first.NextAction, b.status(t, "k").NextAction, "the window counts from when it began waiting")

	b.clock.AdvancePast(first.NextAction.ExpiresAt)
	res, err = rec.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 1, Failed: 1}, res)
	final := b.status(t, "k")
	require.Equal(t, StatusFailed, final.Status)
	require.Equal(t, FailureAuthenticationAbandoned, final.Failure.Code)
	require.Equal(t, "canceled", b.providerStatus(t, "k"), "the provider's payment is cancelled")
	require.Equal(t, 0, b.providerCharges(t, "k"))
	require.Equal(t, int32(1), provider.creates.Load())
	require.Equal(t, int32(1), provider.cancels.Load())

	// The shopper comes back too late: nothing changes.
	b.shopper(t, first.NextAction.URL, "complete")
	require.Equal(t, "canceled", b.providerStatus(t, "k"))
	b.clock.Advance(AuthenticationRecheckDefault)
	require.Equal(t, StatusFailed, b.status(t, "k").Status)
}

// The race at the window's end: the shopper completes just as the
// reconciler cancels. Whichever wins at the provider is the outcome:
// SUCCEEDED with one charge, or FAILED authentication_abandoned with the
// payment cancelled and nothing charged; never a charge with a FAILED answer.
func TestAuthentication_CompleteRacesTheCancel_ExactlyOneOutcome(t *testing.T) {
	t.Parallel()
	const rounds = 48
	b := setup(t, Config{AuthenticationWindow: time.Minute})
	ctx := context.Background()
	actions := make([]string, rounds)
	for i := range rounds {
		r, err := b.svc.ChargeCard(ctx, b.merchant, raceKey(i), authInput("https://shop.example/return"))
		require.NoError(t, err)
		require.NotNil(t, r.NextAction)
		actions[i] = r.NextAction.URL
	}
	b.clock.Advance(time.Minute + time.Second)

	var wg sync.WaitGroup
	errs := make([]error, rounds+1) // the shoppers', then the reconciler's
	for i := range rounds {
		wg.Go(func() { _, errs[i] = b.provider.PressChallenge(actions[i], "complete") })
	}
	rec := NewReconciler(b.svc, ReconcilerConfig{BatchSize: rounds})
	wg.Go(func() { _, errs[rounds] = rec.RunOnce(ctx) })
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "goroutine %d", i)
	}
	// Whatever the pass left open (a cancel refused mid-way is read again), the next ones finish.
	for range 3 {
		b.clock.Advance(AuthenticationCheckIntervalDefault + time.Millisecond)
		_, err := rec.RunOnce(ctx)
		require.NoError(t, err)
	}

	outcomes := map[string]int{}
	for i := range rounds {
		r := b.status(t, raceKey(i))
		atProvider := b.providerStatus(t, raceKey(i))
		switch r.Status {
		case StatusSucceeded:
			require.Equal(t, "succeeded", atProvider, raceKey(i))
			require.Equal(t, 1, b.providerCharges(t, raceKey(i)))
			outcomes["succeeded"]++
		case StatusFailed:
			require.Equal(t, FailureAuthenticationAbandoned, r.Failure.Code, raceKey(i))
			require.Equal(t, "canceled", atProvider, raceKey(i), "FAILED only after a cancel the provider confirmed")
			require.Equal(t, 0, b.providerCharges(t, raceKey(i)))
			outcomes["abandoned"]++
		default:
			t.Fatalf("%s still %s", raceKey(i), r.Status)
		}
	}
	t.Logf("outcomes of %d races: %v", rounds, outcomes)
}

func TestAuthentication_ConcurrentPolls_ReadTheProviderOncePerRecheck(t *testing.T) {
	t.Parallel()
	b, provider := setupCounting(t, Config{})
	ctx := context.Background()
	_, err := b.svc.ChargeCard(ctx, b.merchant, "k", authInput("https://shop.example/return"))
	require.NoError(t, err)
	require.Zero(t, provider.finds.Load())

	b.clock.Advance(AuthenticationRecheckDefault)
	var wg sync.WaitGroup
	results, errs := make([]*Result, 50), make([]error, 50)
	for i := range 50 {
		wg.Go(func() { results[i], errs[i] = b.svc.ChargeStatus(ctx, b.merchant, "k") })
	}
	wg.Wait()
	for i, r := range results {
		require.NoError(t, errs[i])
		require.Equal(t, StatusProcessing, r.Status)
		require.NotNil(t, r.NextAction)
		require.GreaterOrEqual(t, r.RetryAfter, AuthenticationRecheckDefault)
	}
	require.Equal(t, int32(1), provider.finds.Load(), "50 polls within one recheck interval: one read")
}

func TestAuthentication_ReturnURL_IsPartOfTheRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	_, err := b.svc.ChargeCard(ctx, b.merchant, "k", authInput("https://shop.example/return"))
	require.NoError(t, err)
	_, err = b.svc.ChargeCard(ctx, b.merchant, "k", authInput("https://shop.example/elsewhere"))
	require.Equal(t, EKEYREUSED, ErrorCode(err))

	for _, bad := range []string{
		"http://shop.example/return", "javascript:alert(1)", "/return", "https://user:pw@shop.example/",
		"https://shop.example/return#top", "https://shop.example/a b", "ftp://shop.example/",
	} {
		_, err := b.svc.ChargeCard(ctx, b.merchant, "bad", authInput(bad))
		require.Equal(t, EINVALID, ErrorCode(err), bad)
	}
	for _, ok := range []string{"http://127.0.0.1:8080/checkout", "http://localhost:5173/", "http://[::1]/x"} {
		require.NoError(t, authInput(ok).Validate(), ok)
	}
}

// In production a returnUrl is https, loopback included; development keeps
// plain http on loopback. Refused before anything is claimed or created.
func TestAuthentication_ReturnURL_ProductionTakesHTTPSOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prod := setup(t, Config{Production: true})
	dev := setup(t, Config{})
	for _, plain := range []string{"http://127.0.0.1:8080/checkout", "http://localhost:5173/", "http://[::1]/x", "HTTP://127.0.0.1/x"} {
		_, err := prod.svc.ChargeCard(ctx, prod.merchant, "plain", authInput(plain))
		require.Equal(t, EINVALID, ErrorCode(err), plain)
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, "input.returnUrl", e.Field)
		require.Contains(t, e.Message, "https when APP_ENV=production")
		_, err = prod.svc.CreateCheckoutSession(ctx, prod.merchant, []byte("seed"), "plain", SessionInput{Amount: 100, Currency: "USD", ReturnURL: plain})
		require.Equal(t, EINVALID, ErrorCode(err), plain)
		require.Equal(t, EINVALID, ErrorCode(prod.svc.ValidateReturnURL("input.returnUrl", plain)), plain)
		require.NoError(t, dev.svc.ValidateReturnURL("input.returnUrl", plain), "development: "+plain)
	}
	require.Zero(t, countOf(t, prod, "SELECT count(*) FROM charge_attempts"), "nothing claimed")
	require.Zero(t, countOf(t, prod, "SELECT count(*) FROM checkout_sessions"), "nothing created")
	_, err := prod.svc.ChargeCard(ctx, prod.merchant, "secure", authInput("https://shop.example/return"))
	require.NoError(t, err)
	require.NoError(t, prod.svc.ValidateReturnURL("input.returnUrl", ""), "no returnUrl")
	_, err = dev.svc.ChargeCard(ctx, dev.merchant, "loopback", authInput("http://127.0.0.1:8080/checkout"))
	require.NoError(t, err, "development keeps plain http on loopback")
}

func raceKey(i int) string { return fmt.Sprintf("race-%d", i) }

// A provider's webhook only makes chargeonce read: at once, whatever the
// last read, and never more than reading.
func TestAuthentication_Recheck_ReadsAtOnce_DecidesNothingItself(t *testing.T) {
	t.Parallel()
	b, provider := setupCounting(t, Config{})
	ctx := context.Background()
	first, err := b.svc.ChargeCard(ctx, b.merchant, "k", authInput("https://shop.example/return"))
	require.NoError(t, err)
	id := uuid.MustParse(attemptID(t, b, "k"))

	st, err := b.svc.Recheck(ctx, id) // an event while the shopper still authenticates
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, st)
	require.Equal(t, int32(1), provider.finds.Load())

	b.shopper(t, first.NextAction.URL, "complete")
	st, err = b.svc.Recheck(ctx, id) // no clock moved: a webhook is not rationed
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, st)
	st, err = b.svc.Recheck(ctx, id) // redelivered
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, st)
	require.Equal(t, 1, b.providerCharges(t, "k"))
	require.Equal(t, int32(1), provider.creates.Load())
	require.Equal(t, 1, b.events(t, "k", EventChargeSucceeded))

	st, err = b.svc.Recheck(ctx, uuid.New()) // not an attempt of ours
	require.NoError(t, err)
	require.Empty(t, st)
}
