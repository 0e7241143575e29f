package cardsim

// behaviour is what a payment method token makes the simulator do.
type behaviour int

const (
	succeed behaviour = iota
	decline
	slow
	providerError
	lostResponse
)

// tokenLostResponse is named because answerCharge recognises it again in a
// stored charge: a replay loses its response too.
const tokenLostResponse = "pm_card_lostResponse"

type tokenSpec struct {
	behaviour      behaviour
	failureCode    string
	failureMessage string
}

// tokens are the payment methods the simulator knows; any other is refused.
var tokens = map[string]tokenSpec{
	"pm_card_visa":              {behaviour: succeed},
	"pm_card_mastercard":        {behaviour: succeed},
	"pm_card_chargeDeclined":    {behaviour: decline, failureCode: "card_declined", failureMessage: "Your card was declined."},
	"pm_card_insufficientFunds": {behaviour: decline, failureCode: "insufficient_funds", failureMessage: "Your card has insufficient funds."},
	"pm_card_slow":              {behaviour: slow},
	"pm_card_providerError":     {behaviour: providerError},
	tokenLostResponse:           {behaviour: lostResponse},
}

// redactToken shortens a card token for the log: its first half, at most 8
// characters, then "…". A log line never carries a whole token.
func redactToken(token string) string {
	return token[:min(8, len(token)/2)] + "…"
}
