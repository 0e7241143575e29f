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

// lookup returns the attempt's PaymentIntents, oldest first, each as it
// is now, read by id; none when Stripe certainly holds none. One attempt
// should have one: more is logged, and payment settles on one of their
// charges (FindCharges).
func (p *Provider) lookup(ctx context.Context, req payment.ProviderChargeRequest) ([]*stripego.PaymentIntent, error) {
	if req.AttemptID == uuid.Nil || req.AttemptCreatedAt.IsZero() {
		return nil, errors.New("stripe: look up PaymentIntent: the request names no attempt")
	}
	params := &stripego.PaymentIntentListParams{
		CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: req.AttemptCreatedAt.Add(-lookupMargin).Unix()},
	}
	params.Limit = stripego.Int64(lookupPageSize)
	want := req.AttemptID.String()
	var listed []*stripego.PaymentIntent // newest first
	n := 0
	for pi, err := range p.client.V1PaymentIntents.List(ctx, params).All(ctx) {
		if err != nil {
			return nil, p.callFailed(ctx, "list PaymentIntents", err)
		}
		if n++; n > lookupMaxIntents {
			return nil, fmt.Errorf("%w: stripe: more than %d PaymentIntents since attempt %s began; cannot tell which are its",
				payment.ErrOutcomeUnknown, lookupMaxIntents, want)
		}
		if pi.Metadata[MetadataAttemptID] == want {
			listed = append(listed, pi)
		}
	}
	if len(listed) > 1 {
		// One attempt, one PaymentIntent: more is a bug, and a second
		// successful one took the money twice; payment refunds it.
		p.log.ErrorContext(ctx, "Stripe holds several PaymentIntents for one attempt",
			"attempt_id", want, "payment_intents", len(listed))
	}
	found := make([]*stripego.PaymentIntent, 0, len(listed))
	for _, pi := range slices.Backward(listed) {
		now, err := p.retrieve(ctx, pi.ID)
		if err != nil {
			return nil, err
		}
		found = append(found, now)
	}
	return found, nil
}
