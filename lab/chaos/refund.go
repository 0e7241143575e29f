package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"chargeonce/internal/apiclient"
)

// The refund load: while the checkouts run, and through the kills, its
// workers take succeeded checkouts, one each at a time, and refund part of
// each in one of three ways, each refund under a key of its own that every
// retry of it sends again.

// The refusals a refund's client takes as its final answer: nothing was
// claimed, and retrying the same request would not change that (unless
// another refund of the charge failed meanwhile, which the check finds).
const (
	codeExceeds        = "REFUND_EXCEEDS_CHARGE"
	codeChargeNotFound = "CHARGE_NOT_FOUND"
)

// refundWorkers are how many charges are being refunded at a time: a
// storm waits out its PROCESSING answers' retryAfterMs, and the other
// worker goes on meanwhile.
const refundWorkers = 2

// refundStormClients is how many clients send a storm's one refund at
// once, spread over the instances.
const refundStormClients = 6

// refund is one refund key: the checkout whose charge it refunds, the
// request, and what its clients were told.
type refund struct {
	key   string
	of    *checkout
	input apiclient.RefundInput
	record
}

// amount is what the refund asks for.
func (rf *refund) amount() int64 { return int64(*rf.input.Amount) }

// refund is the refund's send. A refusal is a final answer, whose status is
// its code.
func (rf *refund) refund(ctx context.Context, at *apiclient.Client) (answer, bool, time.Duration, error) {
	p, err := at.RefundCharge(ctx, rf.key, rf.input)
	if code := apiclient.Code(err); code == codeExceeds || code == codeChargeNotFound {
		return answer{status: code}, true, 0, nil
	}
	if !p.Final() {
		return answer{}, false, p.RetryAfter(), err
	}
	return answer{status: p.Status, id: refundID(p), replayed: p.Replayed}, true, 0, nil
}

// refundID is the id of r's refund, "" without one.
func refundID(r *apiclient.RefundResult) string {
	if r == nil || r.Refund == nil {
		return ""
	}
	return r.Refund.Id
}

// refundLoad refunds succeeded checkouts until the load stops: half of them
// get one partial refund; three in ten a race of two refunds at once, each
// more than half the charge, so that only one fits; two in ten a storm of
// one partial refund sent by refundStormClients clients across the
// instances.
func (r *run) refundLoad(ctx context.Context) {
	for !r.stop.Load() && ctx.Err() == nil {
		co := r.pick(takeForRefund)
		if co == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		charged := int64(*co.input.Amount) // at least 100
		var sends sync.WaitGroup
		switch n := rand.IntN(10); {
		case n < 5:
			r.count(&r.report.RefundSingles)
			rf := r.newRefund(co, 1+rand.Int64N(charged-1))
			sends.Go(func() { r.client.settle(ctx, &rf.record, "", rf.refund) })
		case n < 8:
			r.count(&r.report.RefundRaces)
			for range 2 {
				half := charged / 2
				rf := r.newRefund(co, half+1+rand.Int64N(charged-half-1))
				sends.Go(func() { r.client.settle(ctx, &rf.record, "", rf.refund) })
			}
		default:
			r.count(&r.report.RefundStorms)
			rf := r.newRefund(co, 1+rand.Int64N(charged-1))
			r.client.storm(ctx, &rf.record, rf.refund, refundStormClients)
		}
		sends.Wait()
	}
}

// takeForRefund takes a checkout that charged (captureMethod AUTOMATIC)
// and that no load has taken yet.
func takeForRefund(co *checkout) bool {
	return take(co, false)
}

// take takes a checkout that succeeded, manual or not as asked, and that
// no load has taken yet.
func take(co *checkout, manual bool) bool {
	told, ok := co.told()
	if !ok || told.status != apiclient.Succeeded || co.manual != manual || co.taken {
		return false
	}
	co.taken = true
	return true
}

// newRefund is a new refund key of amount of co's charge.
func (r *run) newRefund(co *checkout, amount int64) *refund {
	told, _ := co.told()
	rf := &refund{key: uuid.NewString(), of: co,
		input: apiclient.RefundInput{ChargeId: told.id, Amount: new(int(amount)), Reason: new("chaos")}}
	return enlist(r, &r.refunds, rf, &rf.record)
}

// count adds one to a figure of the report.
func (r *run) count(figure *int) {
	r.mu.Lock()
	*figure++
	r.mu.Unlock()
}
