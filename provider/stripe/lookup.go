package stripe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	stripego "github.com/stripe/stripe-go/v85"

	"chargeonce/payment"
)

// The lookup lists the PaymentIntents created since the attempt was
// claimed, less lookupMargin for the clocks of chargeonce and Stripe, and
// picks the attempt's by the attempt id in their metadata. Listing is read
// from Stripe's primary store, so a PaymentIntent that exists is listed:
// "none listed" proves there is none, which the Search API, up to a minute
// behind, cannot. More than lookupMaxIntents PaymentIntents in that span
// and the lookup gives up rather than claim there is none.
const (
	lookupMargin     = 10 * time.Minute
	lookupPageSize   = 100
	lookupMaxIntents = 20_000
)

// lookup returns the attempt's PaymentIntent as it is now, read by id; nil
// when Stripe certainly holds none. duplicates are the attempt's other
// PaymentIntents that succeeded: one attempt should have one.
func (p *Provider) lookup(ctx context.Context, req payment.ProviderChargeRequest) (_ *stripego.PaymentIntent, duplicates []string, _ error) {
	if req.AttemptID == uuid.Nil || req.AttemptCreatedAt.IsZero() {
		return nil, nil, errors.New("stripe: look up PaymentIntent: the request names no attempt")
	}
	params := &stripego.PaymentIntentListParams{
		CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: req.AttemptCreatedAt.Add(-lookupMargin).Unix()},
	}
	params.Limit = stripego.Int64(lookupPageSize)
	want := req.AttemptID.String()
	var found []*stripego.PaymentIntent
	listed := 0
	for pi, err := range p.client.V1PaymentIntents.List(ctx, params).All(ctx) {
		if err != nil {
			return nil, nil, p.callFailed(ctx, "list PaymentIntents", err)
		}
		if listed++; listed > lookupMaxIntents {
			return nil, nil, fmt.Errorf("%w: stripe: more than %d PaymentIntents since attempt %s began; cannot tell which is its",
				payment.ErrOutcomeUnknown, lookupMaxIntents, want)
		}
		if pi.Metadata[MetadataAttemptID] == want {
			found = append(found, pi)
		}
	}
	if len(found) == 0 {
		return nil, nil, nil
	}
	// Listed newest first: settle on the first that succeeded.
	pick := found[len(found)-1]
	var succeeded []string
	for _, pi := range slices.Backward(found) {
		if pi.Status == stripego.PaymentIntentStatusSucceeded {
			if succeeded == nil {
				pick = pi
			}
			succeeded = append(succeeded, pi.ID)
		}
	}
	if len(found) > 1 {
		// One attempt, one PaymentIntent: more is a bug, and a second
		// successful one took the money twice; payment refunds it.
		p.log.ErrorContext(ctx, "Stripe holds several PaymentIntents for one attempt",
			"attempt_id", want, "payment_intents", len(found), "succeeded", len(succeeded), "settled_on", pick.ID)
	}
	if len(succeeded) > 1 {
		duplicates = succeeded[1:]
	}
	pi, err := p.retrieve(ctx, pick.ID)
	return pi, duplicates, err
}
