package stripe

import (
	"context"
	"fmt"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// Authorizations. A charge made with payment.CaptureManual is a
// PaymentIntent created with capture_method=manual: its card is only
// authorized, and it waits in requires_capture with amount_capturable
// until it is captured (capture.go), cancelled (void.go) or lapses. It is
// asked for with payment_method_options[card][request_multicapture]
// =if_available, so that where the account and the card allow it (its
// charge's payment_method_details.card.multicapture.status) it can be
// captured in several parts, for split shipments. Stripe lets an online
// card's authorization lapse at its charge's capture_before (7 days after
// it, by default) and then cancels the PaymentIntent with
// cancellation_reason automatic. Each of these is read from the
// PaymentIntent with its latest charge expanded (retrieve).

// authorizationWindowDefault is how long Stripe holds an online card's
// authorization when its charge does not say (capture_before).
const authorizationWindowDefault = 7 * 24 * time.Hour

// ReadAuthorization implements payment.Provider: it reads the
// PaymentIntent providerChargeID and says where its authorization stands.
func (p *Provider) ReadAuthorization(ctx context.Context, providerChargeID string) (payment.ProviderAuthorization, error) {
	pi, err := p.retrieve(ctx, providerChargeID)
	if err != nil {
		return payment.ProviderAuthorization{}, err
	}
	auth, ok := authorizationOf(pi, time.Now())
	switch {
	case ok:
		return auth, nil
	case pi.Status == stripego.PaymentIntentStatusProcessing:
		return payment.ProviderAuthorization{}, fmt.Errorf("%w: stripe: PaymentIntent %s is processing", payment.ErrOutcomeUnknown, pi.ID)
	}
	return payment.ProviderAuthorization{}, fmt.Errorf("stripe: PaymentIntent %s is %s: it holds no authorization", pi.ID, pi.Status)
}

// authorizationOf is where pi's authorization stands at now, its amounts in
// chargeonce's minor units; ok is false when pi never charged the card.
// An automatic charge reads as captured in full.
func authorizationOf(pi *stripego.PaymentIntent, now time.Time) (auth payment.ProviderAuthorization, ok bool) {
	currency := strings.ToUpper(string(pi.Currency))
	auth = payment.ProviderAuthorization{
		Amount:   chargeonceAmount(pi.Amount, currency),
		Captured: chargeonceAmount(pi.AmountReceived, currency),
	}
	manual := pi.CaptureMethod == stripego.PaymentIntentCaptureMethodManual
	if manual {
		auth.ExpiresAt = expiresAt(pi)
	}
	switch pi.Status {
	case stripego.PaymentIntentStatusRequiresCapture:
		auth.State = payment.AuthorizationOpen
	case stripego.PaymentIntentStatusSucceeded:
		auth.State = payment.AuthorizationCaptured
		if manual && pi.AmountReceived < pi.Amount && !finalCaptureMarked(pi) && !now.Before(auth.ExpiresAt) {
			// It took less than was authorized, and no final capture of
			// ours released the rest: the authorization lapsed after its
			// captures, which Stripe leaves succeeded with what they took.
			auth.State = payment.AuthorizationExpired
		}
	case stripego.PaymentIntentStatusCanceled:
		switch {
		case !authorized(pi):
			return payment.ProviderAuthorization{}, false
		case lapsed(pi):
			auth.State = payment.AuthorizationExpired
		case pi.AmountReceived > 0:
			// Cancelled after captures: what remained was released.
			auth.State = payment.AuthorizationCaptured
		default:
			auth.State = payment.AuthorizationVoided
		}
	default:
		return payment.ProviderAuthorization{}, false
	}
	return auth, true
}

// authorized reports whether pi's card was charged (authorized): its latest
// charge, expanded, succeeded. A cancelled PaymentIntent that never was
// (cancelled while it waited for 3-D Secure) holds no authorization.
func authorized(pi *stripego.PaymentIntent) bool {
	return pi.LatestCharge != nil && pi.LatestCharge.Status == stripego.ChargeStatusSucceeded
}

// lapsed reports whether Stripe cancelled pi because its authorization
// lapsed.
func lapsed(pi *stripego.PaymentIntent) bool {
	return pi.CancellationReason == stripego.PaymentIntentCancellationReasonAutomatic ||
		pi.CancellationReason == stripego.PaymentIntentCancellationReasonExpired
}

// expiresAt is when pi's authorization lapses: its charge's
// capture_before, else authorizationWindowDefault after its creation.
func expiresAt(pi *stripego.PaymentIntent) time.Time {
	if card := chargeCard(pi); card != nil && card.CaptureBefore > 0 {
		return time.Unix(card.CaptureBefore, 0).UTC()
	}
	return time.Unix(pi.Created, 0).UTC().Add(authorizationWindowDefault)
}

// multicaptureAvailable reports whether Stripe lets pi be captured in
// parts; unknown (its charge not read) is no.
func multicaptureAvailable(pi *stripego.PaymentIntent) bool {
	card := chargeCard(pi)
	return card != nil && card.Multicapture != nil &&
		card.Multicapture.Status == stripego.ChargePaymentMethodDetailsCardMulticaptureStatusAvailable
}

// chargeCard is the card details of pi's latest charge, when expanded.
func chargeCard(pi *stripego.PaymentIntent) *stripego.ChargePaymentMethodDetailsCard {
	if pi.LatestCharge == nil || pi.LatestCharge.PaymentMethodDetails == nil {
		return nil
	}
	return pi.LatestCharge.PaymentMethodDetails.Card
}

// charged is the succeeded charge of pi, which charged the card: an
// authorization for a manual PaymentIntent, read with its latest charge
// expanded so that its expiry is the one Stripe says.
func (p *Provider) charged(ctx context.Context, pi *stripego.PaymentIntent) (payment.ProviderCharge, error) {
	pc := payment.ProviderCharge{ID: pi.ID, Succeeded: true}
	if pi.CaptureMethod != stripego.PaymentIntentCaptureMethodManual && pi.Status != stripego.PaymentIntentStatusRequiresCapture {
		return pc, nil
	}
	if pi.LatestCharge == nil || pi.LatestCharge.PaymentMethodDetails == nil {
		// An answer that names its charge only (a confirm's).
		var err error
		if pi, err = p.retrieve(ctx, pi.ID); err != nil {
			return payment.ProviderCharge{}, err
		}
	}
	auth, ok := authorizationOf(pi, time.Now())
	if !ok {
		return payment.ProviderCharge{}, fmt.Errorf("%w: stripe: PaymentIntent %s is %s, and holds no authorization", payment.ErrOutcomeUnknown, pi.ID, pi.Status)
	}
	pc.Authorization = &auth
	return pc, nil
}
