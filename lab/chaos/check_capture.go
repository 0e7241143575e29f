package chaos

import (
	"context"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"chargeonce/internal/apiclient"
	"chargeonce/payment"
)

// byAuthorization counts the capture and void keys and checks what their
// clients were told, and groups them by the authorization they capture or
// void, in the order they were made.
func (r *run) byAuthorization() (captured []*checkout, capturesOf map[*checkout][]*capture) {
	rep := r.report
	capturesOf = map[*checkout][]*capture{}
	for _, cp := range r.captures {
		if cp.void {
			rep.Voids++
		} else {
			rep.Captures++
		}
		if r.checkAnswers(cp.what(), cp.key, &cp.record) && cp.held {
			rep.HeldCaptures++
			rep.HeldCapturesLongest = max(rep.HeldCapturesLongest, cp.final.Sub(cp.first))
		}
		if capturesOf[cp.of] == nil {
			captured = append(captured, cp.of)
		}
		capturesOf[cp.of] = append(capturesOf[cp.of], cp)
	}
	return captured, capturesOf
}

// capturesSeen is what one authorization's captures and voids left behind,
// read after the load: in chargeonce, and at the provider.
type capturesSeen struct {
	// stored is each key's captureStatus or voidStatus now, in the order of
	// the keys; nil for a key chargeonce does not know. attempts is each
	// key's attempt id in the database, "" for none.
	stored   []*answer
	attempts []string
	// charge is chargeonce's charge, as its captures left it; nil when the
	// checkout's key has no charge.
	charge *apiclient.CapturedCharge
	// authorization is the provider's charge; captures and voids are its
	// captures (made or declined) and its voids.
	authorization *apiclient.ProviderCharge
	captures      []apiclient.ProviderCapture
	voids         []apiclient.ProviderVoid
}

// capturesSeen reads what the captures and voids of the checkout with key
// left behind; attempts are the capture and void attempts' ids by key.
func (c *client) capturesSeen(ctx context.Context, key string, keys []*capture, attempts map[string]string) (capturesSeen, error) {
	var seen capturesSeen
	for _, cp := range keys {
		var st *answer
		var err error
		if cp.void {
			st, err = ask(ctx, c, "voidStatus "+cp.key, func(i *apiclient.Client) (*answer, error) {
				p, err := i.VoidStatus(ctx, cp.key)
				if p == nil || err != nil {
					return nil, err
				}
				return new(voidAnswer(p)), nil
			})
		} else {
			st, err = ask(ctx, c, "captureStatus "+cp.key, func(i *apiclient.Client) (*answer, error) {
				p, err := i.CaptureStatus(ctx, cp.key)
				if p == nil || err != nil {
					return nil, err
				}
				return new(captureAnswer(p)), nil
			})
		}
		if err != nil {
			return seen, err
		}
		seen.stored = append(seen.stored, st)
		seen.attempts = append(seen.attempts, attempts[cp.key])
	}
	charge, err := ask(ctx, c, "the captures of "+key, func(i *apiclient.Client) (*apiclient.CapturedCharge, error) {
		return i.ChargeCaptures(ctx, key)
	})
	if err != nil || charge == nil {
		return seen, err
	}
	seen.charge = charge
	id := charge.ProviderChargeId
	if seen.authorization, err = ask(ctx, c, "the provider's charge "+id, func(i *apiclient.Client) (*apiclient.ProviderCharge, error) {
		return i.ProviderChargeByID(ctx, id)
	}); err != nil {
		return seen, err
	}
	if seen.captures, err = ask(ctx, c, "the provider's captures of "+id, func(i *apiclient.Client) ([]apiclient.ProviderCapture, error) {
		return i.ListProviderCaptures(ctx, apiclient.ProviderCaptureFilter{Charge: id})
	}); err != nil {
		return seen, err
	}
	seen.voids, err = ask(ctx, c, "the provider's voids of "+id, func(i *apiclient.Client) ([]apiclient.ProviderVoid, error) {
		return i.ListProviderVoids(ctx, apiclient.ProviderVoidFilter{Charge: id})
	})
	return seen, err
}

// captureAttempts are the database's capture and void attempts: each
// one's id, by its idempotency key (the run's keys are all the demo
// merchant's).
func (r *run) captureAttempts(ctx context.Context) (map[string]string, error) {
	conn, err := pgx.Connect(ctx, r.c.Formation.URL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT idempotency_key, id::text FROM charge_attempts WHERE kind IN ('capture', 'void')`)
	if err != nil {
		return nil, err
	}
	attempts := map[string]string{}
	var key, id string
	_, err = pgx.ForEachRow(rows, []any{&key, &id}, func() error {
		attempts[key] = id
		return nil
	})
	return attempts, err
}

// checkCaptures checks the captures and voids of co's authorization
// against what their clients were told: each key final, SUCCEEDED, FAILED
// only for a reason the provider gave, or refused (which claims nothing,
// so chargeonce knows no such key), and each answer still what chargeonce
// holds; no refusal that the end does not explain; never captured above
// the authorization, and never both captured and voided; chargeonce's
// amountCaptured, captureStatus and captures what the succeeded captures
// made; and at the provider, by the attempt each capture's and void's
// metadata names (under chargeonce's key for it), exactly one capture per
// succeeded capture key, for what it took, one void per succeeded void
// key, and none for any other key, none twice.
func (r *run) checkCaptures(co *checkout, keys []*capture, seen capturesSeen) {
	rep := r.report
	authorized := int64(*co.input.Amount)
	told := make([]answer, len(keys)) // a zero answer: never final, reported already
	capturedIDs := map[string]bool{}
	var captured int64 // what the captures answered SUCCEEDED took
	var finalDone, voided, failed bool
	for i, cp := range keys {
		told[i], _ = cp.told()
		st := seen.stored[i]
		switch told[i].status {
		case "":
		case apiclient.Succeeded:
			if cp.void {
				rep.VoidsSucceeded++
				voided = true
			} else {
				rep.CapturesSucceeded++
				captured += told[i].amount
				capturedIDs[told[i].id] = true
				finalDone = finalDone || cp.releasesRest()
				if a := cp.asked(); a != 0 && told[i].amount != a {
					rep.problem("capture key %s asked for %d, and captured %d", cp.key, a, told[i].amount)
				}
			}
			if st == nil || st.status != told[i].status || st.id != told[i].id || st.amount != told[i].amount {
				rep.CapturesLost++
				rep.problem("%s %s: answered %s, and %s now", cp.what(), cp.key, describeAnswer(&told[i]), describeAnswer(st))
			}
		case apiclient.Failed:
			failed = true
			if !cp.void {
				rep.CapturesFailed++
			}
			if st == nil || st.status != told[i].status || st.failure != told[i].failure {
				rep.CapturesLost++
				rep.problem("%s %s: answered %s, and %s now", cp.what(), cp.key, describeAnswer(&told[i]), describeAnswer(st))
			}
			if cp.void {
				// The provider keeps no refused void to show: a void in
				// this run has no reason to fail.
				rep.problem("void key %s of key %s's authorization: FAILED (%s)", cp.key, co.key, told[i].failure)
			}
		default:
			if cp.void {
				rep.VoidsRefused++
			} else {
				rep.CapturesRefused++
			}
			if st != nil {
				rep.CapturesLost++
				rep.problem("%s %s: refused with %s, and %s now", cp.what(), cp.key, told[i].status, describeAnswer(st))
			}
		}
	}
	beyond := captured > authorized
	if beyond {
		rep.problem("key %s: captures of %d succeeded, of an authorization of %d", co.key, captured, authorized)
	}
	both := voided && len(capturedIDs) > 0
	if both {
		rep.problem("key %s: its authorization was both captured and voided", co.key)
	}
	if !failed {
		// A capture that failed held its reservation, or its claim to be
		// final, until it failed: what it made others refused the end
		// cannot show.
		for i, cp := range keys {
			if why := unexplained(cp, told[i].status, authorized-captured, finalDone || captured == authorized, voided, len(capturedIDs) > 0); why != "" {
				rep.problem("%s %s of key %s's authorization: refused with %s, though %s", cp.what(), cp.key, co.key, told[i].status, why)
			}
		}
	}

	c := seen.charge
	if c == nil {
		rep.problem("key %s was captured or voided, and has no charge now", co.key)
		return
	}
	if int64(c.AmountCaptured) != captured {
		rep.problem("key %s: its charge's amountCaptured is %d, and captures of %d succeeded", co.key, c.AmountCaptured, captured)
	}
	recorded := map[string]bool{}
	for _, s := range c.Captures {
		recorded[s.Id] = true
	}
	if !maps.Equal(recorded, capturedIDs) {
		rep.problem("key %s: its charge's captures are %v, and the clients were told of %v", co.key, slices.Sorted(maps.Keys(recorded)), slices.Sorted(maps.Keys(capturedIDs)))
	}
	if want := captureStatusOf(voided, finalDone, captured, authorized); !both && c.CaptureStatus != want {
		rep.problem("key %s: its charge is %s, and its keys make it %s", co.key, c.CaptureStatus, want)
	}

	// At the provider: what was captured and voided, by the key whose
	// attempt each capture's and void's metadata names.
	byAttempt, byKey := map[string]int{}, map[string]int{}
	for i, cp := range keys {
		byKey[cp.key] = i
		if seen.attempts[i] != "" {
			byAttempt[seen.attempts[i]] = i
		}
	}
	// madeFor is the index of the key a provider capture or void was made
	// for, by the attempt its metadata names, or by the client's key it
	// names when no key of this charge has that attempt (a problem); -1
	// when neither is one of this charge's keys.
	madeFor := func(kind, what, id, providerKey string, metadata map[string]string) int {
		attempt := metadata["chargeonce_attempt_id"]
		i, ok := byAttempt[attempt]
		if ok && providerKey == "chargeonce_"+attempt && metadata["chargeonce_kind"] == kind &&
			metadata["chargeonce_charge_id"] == c.Id && metadata["client_idempotency_key"] == keys[i].key {
			return i
		}
		rep.problem("key %s: the provider's %s %s (key %q, metadata %v) names no %s attempt of charge %s", co.key, what, id, providerKey, metadata, kind, c.Id)
		if i, ok := byKey[metadata["client_idempotency_key"]]; ok {
			return i
		}
		return -1
	}
	made := make([][]apiclient.ProviderCapture, len(keys))
	declined := make([][]apiclient.ProviderCapture, len(keys))
	var moved int64
	for _, p := range seen.captures {
		i := madeFor(string(payment.KindCapture), "capture", p.ID, p.IdempotencyKey, p.Metadata)
		if p.Status == "succeeded" {
			rep.ProviderCaptures++
			moved += p.Amount
		}
		switch {
		case i < 0:
		case p.Status == "succeeded":
			made[i] = append(made[i], p)
		default:
			declined[i] = append(declined[i], p)
		}
	}
	voidsOf := make([]int, len(keys))
	for _, v := range seen.voids {
		rep.ProviderVoids++
		if i := madeFor(string(payment.KindVoid), "void", v.ID, v.IdempotencyKey, v.Metadata); i >= 0 {
			voidsOf[i]++
		}
	}
	if moved > authorized && !beyond {
		beyond = true
		rep.problem("key %s: the provider captured %d of an authorization of %d", co.key, moved, authorized)
	}
	if moved != int64(c.AmountCaptured) {
		rep.problem("key %s: the provider captured %d of its charge, whose amountCaptured is %d", co.key, moved, c.AmountCaptured)
	}
	if moved > 0 && len(seen.voids) > 0 && !both {
		both = true
		rep.problem("key %s: the provider captured %d of its authorization and voided it", co.key, moved)
	}
	if a := seen.authorization; a != nil {
		if a.AmountCaptured != moved || a.AmountAuthorized != authorized {
			rep.problem("key %s: the provider's charge %s says %d of %d captured; its captures took %d of %d",
				co.key, a.ID, a.AmountCaptured, a.AmountAuthorized, moved, authorized)
		}
		if want := authorizationStatusOf(voided, finalDone, captured, authorized); !both && a.AuthorizationStatus != want {
			rep.problem("key %s: the provider's authorization is %s, and its keys make it %s", co.key, a.AuthorizationStatus, want)
		}
	}
	if beyond {
		rep.CapturedBeyond++
	}
	if both {
		rep.CapturedAndVoided++
	}
	for i, cp := range keys {
		if cp.void {
			switch {
			case voidsOf[i] > 1:
				rep.problem("void key %s: the provider holds %d voids of it", cp.key, voidsOf[i])
			case told[i].status == apiclient.Succeeded && voidsOf[i] == 0:
				rep.problem("void key %s succeeded, and the provider holds no void of it", cp.key)
			case told[i].status != apiclient.Succeeded && voidsOf[i] != 0:
				rep.problem("void key %s: answered %q, and the provider voided the authorization for it", cp.key, told[i].status)
			}
			continue
		}
		got := made[i]
		switch {
		case len(got) > 1:
			rep.CapturedTwice++
			rep.problem("capture key %s: the provider holds %d captures of it", cp.key, len(got))
		case told[i].status == apiclient.Succeeded && len(got) == 0:
			rep.problem("capture key %s succeeded, and the provider holds no capture of it", cp.key)
		case told[i].status != apiclient.Succeeded && len(got) != 0:
			rep.problem("capture key %s: answered %q, and the provider captured %d for it", cp.key, told[i].status, got[0].Amount)
		case len(got) == 1 && got[0].Amount != told[i].amount:
			rep.problem("capture key %s captured %d, and the provider %d", cp.key, told[i].amount, got[0].Amount)
		case len(got) == 1 && got[0].Final != cp.releasesRest():
			rep.problem("capture key %s: final %t, and the provider's capture final %t", cp.key, cp.releasesRest(), got[0].Final)
		}
		// A failed capture's reason is the provider's when the provider
		// holds it, declined for that reason, under the key's attempt.
		if told[i].status == apiclient.Failed && !slices.ContainsFunc(declined[i], func(p apiclient.ProviderCapture) bool {
			return deref(p.FailureCode) == told[i].failure
		}) {
			rep.problem("capture key %s failed with %s, and the provider holds no capture of it declined so", cp.key, told[i].failure)
		}
	}
}

// unexplained says why a key's refusal (status) is not what the end of its
// authorization explains, "" when it is (or the key was not refused).
// capturable is what remains after the captures that succeeded; closed
// says a final capture succeeded or all was captured; voided and captured
// say a void, a capture, of the authorization succeeded.
func unexplained(cp *capture, status string, capturable int64, closed, voided, captured bool) string {
	switch {
	case status == codeCaptureExceeds && cp.asked() <= capturable:
		return "its amount fits in what remains capturable"
	case status == codeNotCapturable && !closed:
		return "no final capture succeeded and some remains capturable"
	case status == codeVoided && !voided:
		return "no void of it succeeded"
	case status == codeCaptured && !captured:
		return "no capture of it succeeded"
	case status == codeAuthExpired || status == codeChargeNotFound:
		return "nothing in the run makes it so"
	}
	return ""
}

// captureStatusOf is the captureStatus that an authorization's keys that
// succeeded make.
func captureStatusOf(voided, finalDone bool, captured, authorized int64) apiclient.CaptureStatus {
	switch {
	case voided:
		return apiclient.CaptureStatusVoided
	case finalDone || captured == authorized:
		return apiclient.CaptureStatusCaptured
	case captured > 0:
		return apiclient.CaptureStatusPartiallyCaptured
	}
	return apiclient.CaptureStatusUncaptured
}

// authorizationStatusOf is the provider's authorization_status that an
// authorization's keys that succeeded make.
func authorizationStatusOf(voided, finalDone bool, captured, authorized int64) string {
	switch {
	case voided:
		return string(payment.AuthorizationVoided)
	case finalDone || captured == authorized:
		return string(payment.AuthorizationCaptured)
	}
	return string(payment.AuthorizationOpen)
}

// checkCaptureEvents checks that each succeeded capture key has one
// charge.captured in the outbox, each succeeded void key one
// charge.voided, and any other capture or void key none; events counts
// each key's events by type.
func (r *run) checkCaptureEvents(events map[string]map[string]int) {
	for _, cp := range r.captures {
		told, ok := cp.told()
		if !ok {
			continue
		}
		var want map[string]int
		switch {
		case told.status == apiclient.Succeeded && cp.void:
			want = map[string]int{payment.EventChargeVoided: 1}
		case told.status == apiclient.Succeeded:
			want = map[string]int{payment.EventChargeCaptured: 1}
		}
		if got := events[cp.key]; !maps.Equal(got, want) {
			r.report.problem("%s %s (%s): events %v in the outbox, want %v", cp.what(), cp.key, told.status, got, want)
		}
	}
}
