package providertest

import "chargeonce/payment"

// The cards of Memory: the card simulator's tokens, each with the
// simulator's behaviour. Any other token is refused as the simulator
// refuses it: a failed charge, payment_method_unknown, with no id and
// nothing stored. (A spent key is no card's doing: see SpendNextKeys.)
const (
	// CardVisa and CardMastercard are charged.
	CardVisa       = "pm_card_visa"
	CardMastercard = "pm_card_mastercard"
	// CardDeclined is declined, card_declined; CardInsufficientFunds,
	// insufficient_funds. The failed charge is stored, with an id.
	CardDeclined          = "pm_card_chargeDeclined"
	CardInsufficientFunds = "pm_card_insufficientFunds"
	// CardSlow is charged after MemoryOptions.SlowDelay.
	CardSlow = "pm_card_slow"
	// CardProviderError fails every send before anything is stored: an
	// error wrapping payment.ErrOutcomeUnknown (the simulator's 500).
	CardProviderError = "pm_card_providerError"
	// CardLostResponse is charged, and the answer lost, on every send of
	// its key: an error wrapping payment.ErrOutcomeUnknown; FindCharges
	// finds the charge.
	CardLostResponse = "pm_card_lostResponse"
	// CardAuthenticationRequired needs 3-D Secure: a charge with a return
	// URL waits for the shopper (PressChallenge), one without fails with
	// payment.FailureAuthenticationRequired.
	CardAuthenticationRequired = "pm_card_authenticationRequired"
	// CardRefundPending is charged; its refunds are pending, then succeed
	// after MemoryOptions.RefundSettle.
	CardRefundPending = "pm_card_refundPending"
	// CardRefundFailsLater is charged; its first refund is pending, then
	// fails after MemoryOptions.RefundSettle (expired_or_canceled_card),
	// and gives its amount back; later ones succeed at once.
	CardRefundFailsLater = "pm_card_refundFailsLater"
	// CardCaptureDeclined is authorized; every capture is declined
	// (card_declined, stored with an id), the authorization left as it was.
	CardCaptureDeclined = "pm_card_captureDeclined"
	// CardCaptureLostResponse is authorized; every capture is made, and its
	// answer lost on every send of its key (payment.ErrOutcomeUnknown);
	// FindCapture finds it.
	CardCaptureLostResponse = "pm_card_captureLostResponse"
	// CardCaptureSlow is authorized; each capture takes
	// MemoryOptions.SlowDelay.
	CardCaptureSlow = "pm_card_captureSlow"
)

// chargeBehaviour is what a card makes of a new charge.
type chargeBehaviour int

const (
	succeed chargeBehaviour = iota
	decline
	slow
	providerError
	loseResponse
	authenticate
)

// refundBehaviour is what a card makes of the refunds of its charges.
type refundBehaviour int

const (
	refundsSucceed     refundBehaviour = iota // at once
	refundsSettleLater                        // pending, then succeeded
	refundsFailLater                          // the first pending, then failed; the others at once
)

// captureBehaviour is what a card makes of the captures of its
// authorizations.
type captureBehaviour int

const (
	capturesSucceed captureBehaviour = iota
	capturesDeclined
	capturesLoseResponse
	capturesSlow
)

// card is what a token makes Memory do.
type card struct {
	charge                      chargeBehaviour
	declineCode, declineMessage string
	refunds                     refundBehaviour
	captures                    captureBehaviour
}

var cards = map[string]card{
	CardVisa:                   {},
	CardMastercard:             {},
	CardDeclined:               {charge: decline, declineCode: "card_declined", declineMessage: "Your card was declined."},
	CardInsufficientFunds:      {charge: decline, declineCode: "insufficient_funds", declineMessage: "Your card has insufficient funds."},
	CardSlow:                   {charge: slow},
	CardProviderError:          {charge: providerError},
	CardLostResponse:           {charge: loseResponse},
	CardAuthenticationRequired: {charge: authenticate},
	CardRefundPending:          {refunds: refundsSettleLater},
	CardRefundFailsLater:       {refunds: refundsFailLater},
	CardCaptureDeclined:        {captures: capturesDeclined},
	CardCaptureLostResponse:    {captures: capturesLoseResponse},
	CardCaptureSlow:            {captures: capturesSlow},
}

// refundOutcome is how a new refund of a charge of c ends: in settlesTo,
// at once or, when later, after it was pending. first says whether it is
// the charge's first refund.
func (c card) refundOutcome(first bool) (later bool, settlesTo payment.RefundState) {
	switch {
	case c.refunds == refundsSettleLater:
		return true, payment.RefundSucceeded
	case c.refunds == refundsFailLater && first:
		return true, payment.RefundFailed
	default:
		return false, payment.RefundSucceeded
	}
}
