package cardsim

// behaviour is what a payment method token makes the simulator do.
type behaviour int

const (
	succeed behaviour = iota
	decline
	slow
	providerError
	lostResponse
	// authenticate: the card needs 3-D Secure. The charge waits for the
	// shopper when it has a return_url to send them back to, and fails with
	// authentication_required when it has none.
	authenticate
)

// tokenLostResponse is named because answerCharge recognises it again in a
// stored charge: a replay loses its response too.
const tokenLostResponse = "pm_card_lostResponse"

// The failure codes of 3-D Secure. They are the strings of chargeonce's
// payment.FailureAuthentication* constants, repeated rather than imported:
// the simulator is a provider of its own and knows nothing of chargeonce's
// domain (whose tests, besides, mount it).
const (
	codeAuthenticationRequired  = "authentication_required"
	codeAuthenticationFailed    = "authentication_failed"
	codeAuthenticationAbandoned = "authentication_abandoned"
)

const (
	messageAuthenticationRequired = "This card requires authentication (3-D Secure), but the charge has no return_url " +
		"to send the shopper back to after it. The card was not charged."
	messageAuthenticationFailed = "The shopper failed the card's authentication (3-D Secure). The card was not charged."
)

// cancelMessage is the failure message of a waiting charge cancelled for
// reason ("" is none given).
func cancelMessage(reason string) string {
	switch reason {
	case "abandoned":
		return "The payment was cancelled: the shopper did not authenticate in time."
	case "":
		return "The payment was cancelled before the shopper authenticated."
	default:
		return "The payment was cancelled before the shopper authenticated (" + reason + ")."
	}
}

// refundBehaviour is what a card makes of the refunds of its charges.
type refundBehaviour int

const (
	refundsSucceed refundBehaviour = iota // every refund succeeds at once
	// refundsSettleLater: every refund is pending, then succeeds when it
	// settles.
	refundsSettleLater
	// refundsFailLater: the charge's first refund is pending, then fails
	// when it settles (expired_or_canceled_card); later ones succeed at once.
	refundsFailLater
)

// captureBehaviour is what a card makes of the captures of its
// authorizations.
type captureBehaviour int

const (
	// The zero value: every capture is made at once.
	_ captureBehaviour = iota
	// capturesDeclined: the card declines every capture (stored, failed,
	// answered 402); the authorization stays as it was.
	capturesDeclined
	// capturesLoseResponse: every capture is made, and its answer (replays
	// included) dropped, as pm_card_lostResponse does for charges.
	capturesLoseResponse
	// capturesSlow: every capture takes the slow delay before it is made.
	capturesSlow
)

// The decline of pm_card_captureDeclined's captures.
const (
	codeCaptureDeclined    = "card_declined"
	messageCaptureDeclined = "The card's issuer declined the capture. Nothing was captured."
)

type tokenSpec struct {
	behaviour      behaviour
	failureCode    string
	failureMessage string
	refunds        refundBehaviour
	captures       captureBehaviour
}

// tokens are the payment methods the simulator knows; any other is refused.
var tokens = map[string]tokenSpec{
	"pm_card_visa":                   {behaviour: succeed},
	"pm_card_mastercard":             {behaviour: succeed},
	"pm_card_chargeDeclined":         {behaviour: decline, failureCode: "card_declined", failureMessage: "Your card was declined."},
	"pm_card_insufficientFunds":      {behaviour: decline, failureCode: "insufficient_funds", failureMessage: "Your card has insufficient funds."},
	"pm_card_slow":                   {behaviour: slow},
	"pm_card_providerError":          {behaviour: providerError},
	tokenLostResponse:                {behaviour: lostResponse},
	"pm_card_authenticationRequired": {behaviour: authenticate},
	"pm_card_refundPending":          {behaviour: succeed, refunds: refundsSettleLater},
	"pm_card_refundFailsLater":       {behaviour: succeed, refunds: refundsFailLater},
	"pm_card_captureDeclined":        {behaviour: succeed, captures: capturesDeclined},
	"pm_card_captureLostResponse":    {behaviour: succeed, captures: capturesLoseResponse},
	"pm_card_captureSlow":            {behaviour: succeed, captures: capturesSlow},
}

// outcome is what a new charge with this card becomes: its status and, when
// it failed, why. Only the card that needs authentication looks at whether
// the request has a return_url; every other card ignores it.
func (spec tokenSpec) outcome(hasReturnURL bool) (status, failureCode, failureMessage string) {
	switch {
	case spec.behaviour == decline:
		return statusFailed, spec.failureCode, spec.failureMessage
	case spec.behaviour == authenticate && hasReturnURL:
		return statusRequiresAction, "", ""
	case spec.behaviour == authenticate:
		return statusFailed, codeAuthenticationRequired, messageAuthenticationRequired
	default:
		return statusSucceeded, "", ""
	}
}

// refundOutcome is how a new refund of a charge with this card ends: in
// settlesTo, at once or, when later, after it was pending. first says
// whether it is the charge's first refund.
func (spec tokenSpec) refundOutcome(first bool) (later bool, settlesTo string) {
	switch {
	case spec.refunds == refundsSucceed, spec.refunds == refundsFailLater && !first:
		return false, statusSucceeded
	case spec.refunds == refundsFailLater:
		return true, statusFailed
	default: // refundsSettleLater
		return true, statusSucceeded
	}
}

// redactToken shortens a card token for the log: its first half, at most 8
// characters, then "…". A log line never carries a whole token.
func redactToken(token string) string {
	return token[:min(8, len(token)/2)] + "…"
}
