package apitest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

func TestCapture_AuthorizeCaptureInPartsThenRefund_EachStepOnceAndRefusedClearly(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	api := s.API(apiclient.DemoAPIKey)
	ctx := context.Background()

	charge, chargeKey := s.Authorize(t, Visa(1000))
	c, err := api.ChargeCaptures(ctx, chargeKey)
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusUncaptured, c.CaptureStatus, "a manual charge only authorizes")
	require.Equal(t, 0, c.AmountCaptured)
	require.Equal(t, 1000, c.AmountCapturable)
	require.NotNil(t, c.AuthorizationExpiresAt, "an open authorization says when it lapses")

	first := NewKey()
	part := s.Capture(t, first, CaptureInput(charge, 300, false))
	require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, part.Status)
	require.False(t, part.Replayed)
	require.Equal(t, 300, part.Capture.Amount)
	require.False(t, part.Capture.Final)
	require.Equal(t, apiclient.CaptureStatusPartiallyCaptured, part.Charge.CaptureStatus)
	require.Equal(t, 300, part.Charge.AmountCaptured)
	require.Equal(t, 700, part.Charge.AmountCapturable)

	again := s.Capture(t, first, CaptureInput(charge, 300, false))
	require.True(t, again.Replayed, "a retry of the key is the stored capture")
	require.Equal(t, part.Capture.Id, again.Capture.Id)

	_, err = api.CaptureCharge(ctx, first, CaptureInput(charge, 301, false))
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", Refused(err))

	_, err = api.CaptureCharge(ctx, NewKey(), CaptureInput(charge, 701, true))
	require.Equal(t, "CAPTURE_EXCEEDS_AUTHORIZATION", Refused(err))
	var apiErr *apiclient.Error
	require.ErrorAs(t, err, &apiErr)
	require.EqualValues(t, 700, apiErr.Errors[0].Extensions["capturable"], "the refusal says what is capturable")

	last := s.Capture(t, NewKey(), CaptureInput(charge, 500, true))
	require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, last.Status)
	require.True(t, last.Capture.Final)
	require.Equal(t, apiclient.CaptureStatusCaptured, last.Charge.CaptureStatus, "a final capture releases the rest")
	require.Equal(t, 800, last.Charge.AmountCaptured)
	require.Equal(t, 0, last.Charge.AmountCapturable)
	require.Nil(t, last.Charge.AuthorizationExpiresAt)
	require.Len(t, last.Charge.Captures, 2)

	_, err = api.CaptureCharge(ctx, NewKey(), CaptureInput(charge, 100, true))
	require.Equal(t, "CHARGE_NOT_CAPTURABLE", Refused(err), "nothing follows a final capture")
	_, err = api.VoidCharge(ctx, NewKey(), apiclient.VoidInput{ChargeId: charge})
	require.Equal(t, "CHARGE_CAPTURED", Refused(err), "a captured charge is refunded, not voided")

	// Refunds apply to what was captured: 800, not the 1,000 authorized.
	_, err = api.RefundCharge(ctx, NewKey(), apiclient.RefundInput{ChargeId: charge, Amount: new(801)})
	require.Equal(t, "REFUND_EXCEEDS_CHARGE", Refused(err))
	refund, err := api.RefundCharge(ctx, NewKey(), apiclient.RefundInput{ChargeId: charge})
	require.NoError(t, err)
	require.Equal(t, apiclient.Succeeded, refund.Status)
	require.Equal(t, 800, refund.Refund.Amount, "all that was captured")

	status, err := api.CaptureStatus(ctx, first)
	require.NoError(t, err)
	require.Equal(t, part.Capture.Id, status.Capture.Id)
	none, err := api.CaptureStatus(ctx, chargeKey)
	require.NoError(t, err)
	require.Nil(t, none, "a charge's key is no capture's")
}

func TestCapture_AutomaticCharge_IsCapturedAndNeitherCapturedNorVoidedAgain(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	api := s.API(apiclient.DemoAPIKey)
	ctx := context.Background()
	key := NewKey()
	res, err := api.ChargeCard(ctx, key, Visa(500))
	require.NoError(t, err)
	c, err := api.ChargeCaptures(ctx, key)
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusCaptured, c.CaptureStatus)
	require.Equal(t, 500, c.AmountCaptured)
	require.Equal(t, 0, c.AmountCapturable)
	require.Nil(t, c.AuthorizationExpiresAt)

	_, err = api.CaptureCharge(ctx, NewKey(), CaptureInput(res.Charge.Id, 0, true))
	require.Equal(t, "CHARGE_NOT_CAPTURABLE", Refused(err))
	_, err = api.VoidCharge(ctx, NewKey(), apiclient.VoidInput{ChargeId: res.Charge.Id})
	require.Equal(t, "CHARGE_CAPTURED", Refused(err))
	_, err = api.CaptureCharge(ctx, NewKey(), CaptureInput(NewKey(), 0, true))
	require.Equal(t, "CHARGE_NOT_FOUND", Refused(err))
}

func TestVoid_ReleasesTheAuthorization_AndRefusesWhatFollows(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	api := s.API(apiclient.DemoAPIKey)
	ctx := context.Background()
	charge, _ := s.Authorize(t, Visa(1000))

	key := NewKey()
	v := s.Void(t, key, charge)
	require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, v.Status)
	require.Equal(t, charge, v.Void.ChargeId)
	require.Equal(t, apiclient.CaptureStatusVoided, v.Charge.CaptureStatus)
	require.Equal(t, 0, v.Charge.AmountCapturable)
	require.Nil(t, v.Charge.AuthorizationExpiresAt)

	again := s.Void(t, key, charge)
	require.True(t, again.Replayed)
	require.Equal(t, v.Void.Id, again.Void.Id)

	_, err := api.VoidCharge(ctx, NewKey(), apiclient.VoidInput{ChargeId: charge})
	require.Equal(t, "CHARGE_VOIDED", Refused(err), "one void per authorization")
	_, err = api.CaptureCharge(ctx, NewKey(), CaptureInput(charge, 100, false))
	require.Equal(t, "CHARGE_VOIDED", Refused(err))
	_, err = api.RefundCharge(ctx, NewKey(), apiclient.RefundInput{ChargeId: charge, Amount: new(1)})
	require.Equal(t, "REFUND_EXCEEDS_CHARGE", Refused(err), "nothing was captured, so nothing is refundable")

	status, err := api.VoidStatus(ctx, key)
	require.NoError(t, err)
	require.Equal(t, v.Void.Id, status.Void.Id)
}

func TestCapture_TwentyKeysOfSixHundredOnOneThousand_CaptureOnce(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	charge, chargeKey := s.Authorize(t, Visa(1000))
	api := s.API(apiclient.DemoAPIKey)

	const n = 20
	results := make([]*apiclient.CaptureResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = api.CaptureCharge(context.Background(), NewKey(), CaptureInput(charge, 600, false))
		})
	}
	wg.Wait()
	succeeded, exceeded := 0, 0
	for i := range n {
		switch {
		case errs[i] == nil:
			require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, results[i].Status, "capture %d", i)
			succeeded++
		case Refused(errs[i]) == "CAPTURE_EXCEEDS_AUTHORIZATION":
			exceeded++
		default:
			t.Fatalf("capture %d: %v", i, errs[i])
		}
	}
	require.Equal(t, 1, succeeded, "exactly one capture of 600 fits in 1,000")
	require.Equal(t, n-1, exceeded)
	c, err := api.ChargeCaptures(context.Background(), chargeKey)
	require.NoError(t, err)
	require.Equal(t, 600, c.AmountCaptured)
	require.Len(t, c.Captures, 1)
	require.Equal(t, 600, s.ProviderCaptured(t, c.ProviderChargeId), "the provider captured 600 once")
}

func TestCapture_OneKeyFiftyTimesAtOnce_OneCaptureAndReplays(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	charge, chargeKey := s.Authorize(t, Visa(1000))
	api := s.API(apiclient.DemoAPIKey)
	key := NewKey()

	const n = 50
	results := make([]*apiclient.CaptureResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = api.CaptureCharge(context.Background(), key, CaptureInput(charge, 400, false))
		})
	}
	wg.Wait()
	ids := map[string]int{}
	for i := range n {
		require.NoError(t, errs[i], "request %d", i)
		switch results[i].Status {
		case apiclient.CaptureAttemptStatusSucceeded:
			ids[results[i].Capture.Id]++
		case apiclient.CaptureAttemptStatusProcessing:
			require.NotNil(t, results[i].RetryAfterMs)
		default:
			t.Fatalf("request %d: %s", i, results[i].Status)
		}
	}
	require.Len(t, ids, 1, "every answer names the one capture")
	c, err := api.ChargeCaptures(context.Background(), chargeKey)
	require.NoError(t, err)
	require.Equal(t, 400, c.AmountCaptured)
	require.Equal(t, 400, s.ProviderCaptured(t, c.ProviderChargeId), "the provider captured once")
}

func TestCaptureAndVoid_TwoHundredRaces_OneWinnerEachTime(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	api := s.API(apiclient.DemoAPIKey)
	ctx := context.Background()
	const races = 200
	captures, voids := 0, 0
	for race := range races {
		charge, chargeKey := s.Authorize(t, Visa(1000))
		var captured *apiclient.CaptureResult
		var voided *apiclient.VoidResult
		var captureErr, voidErr error
		var wg sync.WaitGroup
		wg.Go(func() { captured, captureErr = api.CaptureCharge(ctx, NewKey(), CaptureInput(charge, 0, true)) })
		wg.Go(func() { voided, voidErr = api.VoidCharge(ctx, NewKey(), apiclient.VoidInput{ChargeId: charge}) })
		wg.Wait()
		c, err := api.ChargeCaptures(ctx, chargeKey)
		require.NoError(t, err)
		switch {
		case captureErr == nil && voidErr != nil:
			require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, captured.Status, "race %d", race)
			require.Equal(t, "CHARGE_CAPTURED", Refused(voidErr), "race %d", race)
			require.Equal(t, apiclient.CaptureStatusCaptured, c.CaptureStatus, "race %d", race)
			require.Equal(t, 1000, s.ProviderCaptured(t, c.ProviderChargeId), "race %d: the provider captured", race)
			captures++
		case voidErr == nil && captureErr != nil:
			require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, voided.Status, "race %d", race)
			require.Equal(t, "CHARGE_VOIDED", Refused(captureErr), "race %d", race)
			require.Equal(t, apiclient.CaptureStatusVoided, c.CaptureStatus, "race %d", race)
			require.Equal(t, 0, s.ProviderCaptured(t, c.ProviderChargeId), "race %d: the provider captured nothing", race)
			voids++
		default:
			t.Fatalf("race %d: capture %v, void %v: not exactly one winner", race, captureErr, voidErr)
		}
	}
	t.Logf("%d races: %d won by the capture, %d by the void", races, captures, voids)
}

func TestCapture_LostAnswer_TheRetryReadsItBackUnderTheSameProviderKey_OneCapture(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	api := s.API(apiclient.DemoAPIKey)
	ctx := context.Background()
	charge, chargeKey := s.Authorize(t, WithPaymentMethod("pm_card_captureLostResponse"))

	key := NewKey()
	first := s.Capture(t, key, CaptureInput(charge, 700, false))
	require.Equal(t, apiclient.CaptureAttemptStatusProcessing, first.Status, "the provider's answer was lost: nobody knows yet")
	require.NotNil(t, first.RetryAfterMs)

	var done *apiclient.CaptureResult
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := api.CaptureCharge(ctx, key, CaptureInput(charge, 700, false))
		require.NoError(c, err)
		require.Equal(c, apiclient.CaptureAttemptStatusSucceeded, res.Status)
		done = res
	}, 15*time.Second, 100*time.Millisecond)
	require.Equal(t, 700, done.Capture.Amount)

	captures, err := api.ListProviderCaptures(ctx, apiclient.ProviderCaptureFilter{Charge: done.Charge.ProviderChargeId})
	require.NoError(t, err)
	require.Len(t, captures, 1, "one capture at the provider, however often the answer was lost")
	require.Equal(t, "chargeonce_"+captures[0].Metadata["chargeonce_attempt_id"], captures[0].IdempotencyKey,
		"made under the attempt's one provider key")
	c, err := api.ChargeCaptures(ctx, chargeKey)
	require.NoError(t, err)
	require.Equal(t, 700, c.AmountCaptured)
	require.Equal(t, 700, s.ProviderCaptured(t, c.ProviderChargeId))
}

func TestCapture_DeclinedAtTheProvider_FailsAndGivesTheAmountBack(t *testing.T) {
	t.Parallel()
	s := Start(t, nil)
	charge, chargeKey := s.Authorize(t, WithPaymentMethod("pm_card_captureDeclined"))
	failed := s.Capture(t, NewKey(), CaptureInput(charge, 400, true))
	require.Equal(t, apiclient.CaptureAttemptStatusFailed, failed.Status)
	require.NotNil(t, failed.Failure)
	require.Equal(t, "card_declined", failed.Failure.Code)
	c, err := s.API(apiclient.DemoAPIKey).ChargeCaptures(context.Background(), chargeKey)
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusUncaptured, c.CaptureStatus)
	require.Equal(t, 1999, c.AmountCapturable, "the failed final capture gave its reservation back")
}

func TestAuthorization_ShortWindow_WarnedThenExpired_AndRefusedAfter(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, map[string]string{"SIM_AUTHORIZATION_WINDOW": "3s", "AUTHORIZATION_EXPIRY_WARNING": "2s",
		"RECONCILE_INTERVAL": "100ms"})
	api := s.API(apiclient.DemoAPIKey)
	ctx := context.Background()
	charge, chargeKey := s.Authorize(t, Visa(1000))
	part := s.Capture(t, NewKey(), CaptureInput(charge, 250, false))
	require.Equal(t, apiclient.CaptureAttemptStatusSucceeded, part.Status)

	WaitRows(t, pool, 1, 10*time.Second, `SELECT count(*) FROM charge_events WHERE type = 'charge.authorization_expiring' AND body->'authorization'->>'chargeId' = $1`, charge)
	WaitRows(t, pool, 1, 10*time.Second, `SELECT count(*) FROM charge_events WHERE type = 'charge.authorization_expired' AND body->'authorization'->>'chargeId' = $1`, charge)
	require.Equal(t, 1, CountRows(t, pool, `SELECT count(*) FROM charge_events WHERE type = 'charge.authorization_expiring'`), "warned once")

	c, err := api.ChargeCaptures(ctx, chargeKey)
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusExpired, c.CaptureStatus)
	require.Equal(t, 250, c.AmountCaptured, "what was captured stays captured")
	require.Equal(t, 0, c.AmountCapturable)
	_, err = api.CaptureCharge(ctx, NewKey(), CaptureInput(charge, 100, true))
	require.Equal(t, "AUTHORIZATION_EXPIRED", Refused(err))
	_, err = api.VoidCharge(ctx, NewKey(), apiclient.VoidInput{ChargeId: charge})
	require.Equal(t, "CHARGE_CAPTURED", Refused(err), "a void after a capture is refused first")
	auth, err := api.ProviderChargeByID(ctx, c.ProviderChargeId)
	require.NoError(t, err)
	require.Equal(t, "expired", auth.AuthorizationStatus, "the provider agrees")
}

func TestAuthorization_CaptureRacingTheExpiry_EndsInOneOfTheTwo(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.Open(t, dbURL)
	s := StartOn(t, dbURL, map[string]string{"SIM_AUTHORIZATION_WINDOW": "3s", "RECONCILE_INTERVAL": "50ms"})
	api := s.API(apiclient.DemoAPIKey)
	ctx := context.Background()
	const rounds = 12
	type round struct{ charge, chargeKey string }
	all := make([]round, rounds)
	var wg sync.WaitGroup
	for i := range rounds {
		charge, chargeKey := s.Authorize(t, Visa(1000))
		all[i] = round{charge, chargeKey}
		// Each capture is sent a little later than the one before, so that
		// the rounds straddle the 3 s window (which the provider states in
		// whole seconds).
		wg.Go(func() {
			time.Sleep(time.Second + time.Duration(i)*200*time.Millisecond)
			_, _ = api.CaptureCharge(ctx, NewKey(), CaptureInput(charge, 0, true))
		})
	}
	wg.Wait()
	captured, expired := 0, 0
	for i, r := range all {
		var c *apiclient.CapturedCharge
		require.EventuallyWithT(t, func(co *assert.CollectT) {
			var err error
			c, err = api.ChargeCaptures(ctx, r.chargeKey)
			require.NoError(co, err)
			require.Contains(co, []apiclient.CaptureStatus{apiclient.CaptureStatusCaptured, apiclient.CaptureStatusExpired}, c.CaptureStatus)
		}, 15*time.Second, 100*time.Millisecond, "round %d ends captured or expired", i)
		events := CountRows(t, pool, `SELECT count(*) FROM charge_events WHERE type = 'charge.authorization_expired' AND body->'authorization'->>'chargeId' = $1`, r.charge)
		switch c.CaptureStatus {
		case apiclient.CaptureStatusCaptured:
			require.Equal(t, 1000, s.ProviderCaptured(t, c.ProviderChargeId), "round %d", i)
			require.Zero(t, events, "round %d: a captured authorization never expires", i)
			captured++
		case apiclient.CaptureStatusExpired:
			require.Zero(t, c.AmountCaptured, "round %d", i)
			require.Zero(t, s.ProviderCaptured(t, c.ProviderChargeId), "round %d: nothing taken at the provider", i)
			require.Equal(t, 1, events, "round %d", i)
			expired++
		}
	}
	t.Logf("%d rounds: %d captured, %d expired", rounds, captured, expired)
}
