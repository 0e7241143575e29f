package chaos

import (
	"context"
	"maps"
	"slices"
	"strings"

	"chargeonce/internal/apiclient"
)

// refundsSeen is what one refunded charge's refunds left behind, read after
// the load: in chargeonce, and at the provider.
type refundsSeen struct {
	// stored is each refund key's refundStatus, in the order of the
	// refunds; nil for a key chargeonce does not know.
	stored []*apiclient.RefundResult
	// charge is chargeonce's charge, with what it counts as refunded and
	// its refunds; nil when the checkout's key has no charge.
	charge *apiclient.RefundedCharge
	// provider are the provider's refunds of the charge.
	provider []apiclient.ProviderRefund
}

// refundsSeen reads what the refunds of the checkout with key left behind.
func (c *client) refundsSeen(ctx context.Context, key string, refunds []*refund) (refundsSeen, error) {
	var seen refundsSeen
	for _, rf := range refunds {
		st, err := ask(ctx, c, "refundStatus "+rf.key, func(i *apiclient.Client) (*apiclient.RefundResult, error) {
			return i.RefundStatus(ctx, rf.key)
		})
		if err != nil {
			return seen, err
		}
		seen.stored = append(seen.stored, st)
	}
	charge, err := ask(ctx, c, "the refunds of "+key, func(i *apiclient.Client) (*apiclient.RefundedCharge, error) {
		return i.ChargeRefunds(ctx, key)
	})
	if err != nil || charge == nil {
		return seen, err
	}
	seen.charge = charge
	seen.provider, err = ask(ctx, c, "the provider's refunds of "+charge.ProviderChargeId, func(i *apiclient.Client) ([]apiclient.ProviderRefund, error) {
		return i.ProviderRefunds(ctx, apiclient.DemoMerchant, charge.ProviderChargeId)
	})
	return seen, err
}

// checkRefunds checks the refunds of co's charge against what their clients
// were told: each answer still what chargeonce holds; no refund refused
// that fitted; never more refunded than charged, in chargeonce or at the
// provider; chargeonce's amountRefunded the sum of the refunds that
// succeeded, and its refunds theirs; and at the provider exactly one refund
// per succeeded refund key, for what it asked and named for its attempt,
// and none for any other key.
func (r *run) checkRefunds(co *checkout, refunds []*refund, seen refundsSeen) {
	rep := r.report
	charged := int64(*co.input.Amount)
	told := make([]answer, len(refunds)) // a zero answer: never final, reported already
	toldIDs := map[string]bool{}
	var succeeded int64 // what the refunds answered SUCCEEDED asked for
	for i, rf := range refunds {
		told[i], _ = rf.told()
		st := seen.stored[i]
		switch told[i].status {
		case "":
		case apiclient.Succeeded:
			rep.RefundsSucceeded++
			succeeded += rf.amount()
			toldIDs[told[i].id] = true
			if st == nil || st.Status != told[i].status || refundID(st) != told[i].id {
				rep.RefundsLost++
				rep.problem("refund key %s: answered %s %s, and %s now", rf.key, told[i].status, told[i].id, describe(st))
			}
		case codeExceeds:
			rep.RefundsRefused++
			if st != nil {
				rep.RefundsLost++
				rep.problem("refund key %s: refused with %s, and %s now", rf.key, codeExceeds, describe(st))
			}
		default:
			// A visa card's refunds succeed, and nothing in the run outlasts
			// REDRIVE_WINDOW: a failed refund, or an unknown charge, is a
			// broken guarantee.
			rep.problem("refund key %s of key %s's charge: answered %s", rf.key, co.key, told[i].status)
		}
	}
	beyond := succeeded > charged
	if beyond {
		rep.problem("key %s: refunds of %d succeeded, of a charge of %d", co.key, succeeded, charged)
	}
	for i, rf := range refunds {
		if told[i].status == codeExceeds && rf.amount() <= charged-succeeded {
			rep.problem("refund key %s: %d refused, and %d remains refundable of key %s's charge", rf.key, rf.amount(), charged-succeeded, co.key)
		}
	}

	c := seen.charge
	if c == nil {
		rep.problem("key %s was refunded, and has no charge now", co.key)
		return
	}
	if int64(c.AmountRefunded) != succeeded {
		rep.problem("key %s: its charge's amountRefunded is %d, and refunds of %d succeeded", co.key, c.AmountRefunded, succeeded)
	}
	recorded := map[string]bool{}
	for _, s := range c.Refunds {
		if s.Status == apiclient.Succeeded {
			recorded[s.Id] = true
		}
	}
	if !maps.Equal(recorded, toldIDs) {
		rep.problem("key %s: its charge's refunds are %v, and the clients were told of %v", co.key, slices.Sorted(maps.Keys(recorded)), slices.Sorted(maps.Keys(toldIDs)))
	}

	// At the provider: what went back, by the client's refund key that each
	// refund's metadata names.
	byKey := map[string]int{}
	for i, rf := range refunds {
		byKey[rf.key] = i
	}
	var moved int64
	atProvider := map[string][]apiclient.ProviderRefund{}
	for _, p := range seen.provider {
		if p.Status == "failed" {
			continue
		}
		rep.ProviderRefunds++
		moved += p.Amount
		key := p.Metadata["client_idempotency_key"]
		atProvider[key] = append(atProvider[key], p)
		if _, ok := byKey[key]; !ok {
			rep.problem("key %s: the provider holds refund %s of %d of its charge for key %q, which no client sent", co.key, p.ID, p.Amount, key)
		}
		if !strings.HasPrefix(p.IdempotencyKey, "chargeonce_") || p.Metadata["chargeonce_attempt_id"] == "" ||
			p.Metadata["chargeonce_kind"] != "refund" || p.Metadata["chargeonce_charge_id"] != c.Id {
			rep.problem("key %s: the provider's refund %s (key %q, metadata %v) names no refund attempt of charge %s",
				co.key, p.ID, p.IdempotencyKey, p.Metadata, c.Id)
		}
	}
	if moved > charged && !beyond {
		beyond = true
		rep.problem("key %s: the provider refunded %d of a charge of %d", co.key, moved, charged)
	}
	if beyond {
		rep.RefundedBeyond++
	}
	for i, rf := range refunds {
		got, st := atProvider[rf.key], seen.stored[i]
		switch {
		case len(got) > 1:
			rep.RefundedTwice++
			rep.problem("refund key %s: the provider holds %d refunds of it", rf.key, len(got))
		case told[i].status == apiclient.Succeeded && len(got) == 0:
			rep.problem("refund key %s succeeded, and the provider holds no refund of it", rf.key)
		case told[i].status != apiclient.Succeeded && len(got) != 0:
			rep.problem("refund key %s: answered %q, and the provider refunded it", rf.key, told[i].status)
		case len(got) == 1 && got[0].Amount != rf.amount():
			rep.problem("refund key %s asked for %d, and the provider refunded %d", rf.key, rf.amount(), got[0].Amount)
		case len(got) == 1 && st != nil && st.Refund != nil && deref(st.Refund.ProviderRefundId) != got[0].ID:
			rep.problem("refund key %s: its refund is the provider's %s, not %s", rf.key, got[0].ID, deref(st.Refund.ProviderRefundId))
		}
	}
}

// describe is a stored refund's state, for a problem's line.
func describe(st *apiclient.RefundResult) string {
	if st == nil {
		return "unknown"
	}
	return st.Status + " " + refundID(st)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
