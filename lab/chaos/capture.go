package chaos

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"chargeonce/internal/apiclient"
)

// The capture load: one fresh checkout in manualEvery only authorizes
// (captureMethod MANUAL); while the load runs, and through the kills, its
// workers take the authorizations that succeeded, one each at a time, and
// capture or void each in one of five ways, each capture and each void
// under a key of its own that every retry of it sends again.

// manualEvery: one fresh checkout in manualEvery only authorizes.
const manualEvery = 12

// captureWorkers are how many authorizations are being captured or voided
// at a time.
const captureWorkers = 4

// captureStormClients is how many clients send a storm's one capture or
// void at once, spread over the instances.
const captureStormClients = 3

// The refusals of a capture or a void, which claim nothing.
const (
	codeCaptureExceeds = "CAPTURE_EXCEEDS_AUTHORIZATION"
	codeNotCapturable  = "CHARGE_NOT_CAPTURABLE"
	codeVoided         = "CHARGE_VOIDED"
	codeCaptured       = "CHARGE_CAPTURED"
	codeAuthExpired    = "AUTHORIZATION_EXPIRED"
)

// captureRefusals are the refusals a capture's or a void's client takes as
// its final answer: nothing was claimed, and the same request would be
// refused again. Which of them a sound run may answer, the check says.
var captureRefusals = []string{codeCaptureExceeds, codeNotCapturable, codeVoided, codeCaptured, codeAuthExpired, codeChargeNotFound}

// capture is one capture key or void key of an authorization: the checkout
// whose charge it captures or voids, the request, and what its clients
// were told.
type capture struct {
	key string
	of  *checkout
	// void: the key voids the authorization; it captures otherwise, as
	// input says (Amount nil: all that is capturable).
	void  bool
	input apiclient.CaptureInput
	// held: sent to an instance that was killed during its provider call.
	held bool
	record
}

// asked is what a capture asks for, 0 for all that is capturable.
func (cp *capture) asked() int64 {
	if cp.input.Amount == nil {
		return 0
	}
	return int64(*cp.input.Amount)
}

// releasesRest says whether the key is a final capture: it releases the
// rest of the authorization.
func (cp *capture) releasesRest() bool { return !cp.void && *cp.input.Final }

// what names the key's kind, for a problem's line.
func (cp *capture) what() string {
	if cp.void {
		return "void key"
	}
	return "capture key"
}

// send is the key's send: captureCharge, or voidCharge. A refusal is a
// final answer, whose status is its code.
func (cp *capture) send(ctx context.Context, at *apiclient.Client) (answer, bool, time.Duration, error) {
	if cp.void {
		p, err := at.VoidCharge(ctx, cp.key, apiclient.VoidInput{ChargeId: cp.input.ChargeId})
		if code := apiclient.Code(err); slices.Contains(captureRefusals, code) {
			return answer{status: code}, true, 0, nil
		}
		if !p.Final() {
			return answer{}, false, p.RetryAfter(), err
		}
		return voidAnswer(p), true, 0, nil
	}
	p, err := at.CaptureCharge(ctx, cp.key, cp.input)
	if code := apiclient.Code(err); slices.Contains(captureRefusals, code) {
		return answer{status: code}, true, 0, nil
	}
	if !p.Final() {
		return answer{}, false, p.RetryAfter(), err
	}
	return captureAnswer(p), true, 0, nil
}

// captureAnswer is a capture's answer as the check compares it.
func captureAnswer(p *apiclient.CaptureResult) answer {
	a := answer{status: string(p.Status), replayed: p.Replayed}
	if p.Capture != nil {
		a.id, a.amount = p.Capture.Id, int64(p.Capture.Amount)
	}
	if p.Failure != nil {
		a.failure = p.Failure.Code
	}
	return a
}

// voidAnswer is a void's answer as the check compares it.
func voidAnswer(p *apiclient.VoidResult) answer {
	a := answer{status: string(p.Status), replayed: p.Replayed}
	if p.Void != nil {
		a.id = p.Void.Id
	}
	if p.Failure != nil {
		a.failure = p.Failure.Code
	}
	return a
}

// captureLoad captures or voids succeeded authorizations until the load
// stops: three in ten are captured in two parts, a capture that is not
// final and then a final one of part of the rest; two in ten in full, by a
// storm of captureStormClients clients on one key; one in ten by two
// captures at once (not final), each more than half, so that only one fits;
// two in ten are voided by a storm; two in ten race a capture in full and
// a void, each under its own key, so that only one may win.
func (r *run) captureLoad(ctx context.Context) {
	for !r.stop.Load() && ctx.Err() == nil {
		co := r.pick(takeForCapture)
		if co == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		authorized := int64(*co.input.Amount) // at least 100
		switch n := rand.IntN(10); {
		case n < 3:
			r.count(&r.report.CaptureParts)
			first := r.newCapture(co, 1+rand.Int64N(authorized-1), false)
			r.client.settle(ctx, &first.record, "", first.send)
			rest := authorized
			if told, _ := first.told(); told.status == apiclient.Succeeded {
				rest -= told.amount
			}
			last := r.newCapture(co, 1+rand.Int64N(max(rest, 1)), true)
			r.client.settle(ctx, &last.record, "", last.send)
		case n < 5:
			r.count(&r.report.CaptureFulls)
			cp := r.newCapture(co, 0, true)
			r.client.storm(ctx, &cp.record, cp.send, captureStormClients)
		case n < 6:
			r.count(&r.report.CaptureRaces)
			var sends sync.WaitGroup
			for range 2 {
				half := authorized / 2
				cp := r.newCapture(co, half+1+rand.Int64N(authorized-half-1), false)
				sends.Go(func() { r.client.settle(ctx, &cp.record, "", cp.send) })
			}
			sends.Wait()
		case n < 8:
			r.count(&r.report.VoidStorms)
			v := r.newVoid(co)
			r.client.storm(ctx, &v.record, v.send, captureStormClients)
		default:
			r.count(&r.report.CaptureVoidRaces)
			cp, v := r.newCapture(co, 0, true), r.newVoid(co)
			var sends sync.WaitGroup
			sends.Go(func() { r.client.settle(ctx, &cp.record, "", cp.send) })
			sends.Go(func() { r.client.settle(ctx, &v.record, "", v.send) })
			sends.Wait()
		}
	}
}

// takeForCapture takes an authorization (captureMethod MANUAL) that
// succeeded and that no load has taken yet.
func takeForCapture(co *checkout) bool {
	return take(co, true)
}

// newCapture is a new capture key of amount (0: all that is capturable)
// of co's authorization, final or not.
func (r *run) newCapture(co *checkout, amount int64, final bool) *capture {
	told, _ := co.told()
	cp := &capture{key: uuid.NewString(), of: co, input: apiclient.CaptureInput{ChargeId: told.id, Final: &final}}
	if amount > 0 {
		cp.input.Amount = new(int(amount))
	}
	return r.addCapture(cp)
}

// newVoid is a new void key of co's authorization.
func (r *run) newVoid(co *checkout) *capture {
	told, _ := co.told()
	return r.addCapture(&capture{key: uuid.NewString(), of: co, void: true, input: apiclient.CaptureInput{ChargeId: told.id}})
}

func (r *run) addCapture(cp *capture) *capture {
	return enlist(r, &r.captures, cp, &cp.record)
}
