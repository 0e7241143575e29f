package chaos

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"chargeonce/events"
	"chargeonce/internal/apiclient"
	"chargeonce/payment"
)

// check compares what the clients were told with what the database, the
// provider, the stream and the receipts hold, and fills the report.
func (r *run) check(ctx context.Context) error {
	rep := r.report
	byKey := map[string]*checkout{}
	for _, co := range r.keys {
		byKey[co.key] = co
		rep.Checkouts++
		if !r.checkAnswers("key", co.key, &co.record) {
			continue
		}
		if co.held {
			rep.Held++
			rep.HeldLongest = max(rep.HeldLongest, co.final.Sub(co.first))
		}
		switch co.answers[0].status {
		case apiclient.Succeeded:
			rep.Succeeded++
		default:
			rep.Failed++
		}
		if want := map[bool]string{false: apiclient.Succeeded, true: apiclient.Failed}[co.declined]; co.answers[0].status != want {
			rep.problem("key %s (%s): answered %s", co.key, co.input.PaymentMethod, co.answers[0].status)
		}
	}
	// The refunds of each charge, in the order they were made.
	var refunded []*checkout
	refundsOf := map[*checkout][]*refund{}
	for _, rf := range r.refunds {
		rep.Refunds++
		r.checkAnswers("refund key", rf.key, &rf.record)
		if refundsOf[rf.of] == nil {
			refunded = append(refunded, rf.of)
		}
		refundsOf[rf.of] = append(refundsOf[rf.of], rf)
	}
	captured, capturesOf := r.byAuthorization()
	attempts, err := r.captureAttempts(ctx)
	if err != nil {
		return err
	}

	// What the database holds now, through the API (the primary), and what
	// the provider holds, key by key, refunded charge by refunded charge,
	// and captured authorization by captured authorization.
	var g errgroup.Group
	g.SetLimit(16)
	results := make(chan func(), len(r.keys)+len(refunded)+len(captured))
	for _, co := range r.keys {
		if co.final.IsZero() {
			continue
		}
		g.Go(func() error {
			st, err := r.client.status(ctx, co.key)
			if err != nil {
				return err
			}
			charges, err := r.client.providerCharges(ctx, co.key)
			if err != nil {
				return err
			}
			results <- func() { r.checkStored(co, st, charges) }
			return nil
		})
	}
	for _, co := range refunded {
		g.Go(func() error {
			seen, err := r.client.refundsSeen(ctx, co.key, refundsOf[co])
			if err != nil {
				return err
			}
			results <- func() { r.checkRefunds(co, refundsOf[co], seen) }
			return nil
		})
	}
	for _, co := range captured {
		g.Go(func() error {
			seen, err := r.client.capturesSeen(ctx, co.key, capturesOf[co], attempts)
			if err != nil {
				return err
			}
			results <- func() { r.checkCaptures(co, capturesOf[co], seen) }
			return nil
		})
	}
	err = g.Wait()
	close(results)
	for apply := range results {
		apply()
	}
	if err != nil {
		return err
	}
	if err := r.checkEvents(ctx, byKey); err != nil {
		return err
	}
	for _, k := range rep.Kills {
		if k.FirstSuccess == 0 {
			rep.problem("no checkout that began after the kill of %s succeeded", k.Part)
		}
	}
	return nil
}

// checkAnswers checks what the clients of one key, of a checkout, a
// refund, a capture or a void, were told: final, with codes only to retry
// before, and the same for every client. It is false when the key never
// had a final answer.
func (r *run) checkAnswers(what, key string, rec *record) bool {
	rep := r.report
	rep.Tries += rec.tries
	for _, code := range rec.unknown {
		rep.problem("%s %s: a client got %q, which is neither final nor an error after which nothing ran", what, key, code)
	}
	if rec.final.IsZero() {
		rep.problem("%s %s never had a final answer", what, key)
		return false
	}
	rep.LongestWait = max(rep.LongestWait, rec.final.Sub(rec.first))
	first := rec.answers[0]
	for _, a := range rec.answers[1:] {
		if a.status != first.status || a.id != first.id || a.amount != first.amount || a.failure != first.failure {
			rep.Changed++
			rep.problem("%s %s: answered %s, then %s", what, key, describeAnswer(&first), describeAnswer(&a))
		}
	}
	return true
}

// checkStored checks one key's stored state and provider charges against
// the answers its clients got.
func (r *run) checkStored(co *checkout, st *apiclient.ChargeResult, charges []apiclient.ProviderCharge) {
	rep := r.report
	told := co.answers[0]
	switch {
	case st == nil:
		rep.Lost++
		rep.problem("key %s: answered %s, and unknown now", co.key, told.status)
	case st.Status != told.status || chargeID(st) != told.id:
		rep.Lost++
		rep.problem("key %s: answered %s %s, and %s %s now", co.key, told.status, told.id, st.Status, chargeID(st))
	}
	succeeded := 0
	for _, c := range charges {
		if c.Status == "succeeded" {
			succeeded++
		}
	}
	if len(charges) > 1 || succeeded > 1 {
		rep.Doubled++
		rep.problem("key %s: the provider holds %d charges", co.key, len(charges))
	}
	switch told.status {
	case apiclient.Succeeded:
		if succeeded != 1 {
			rep.problem("key %s succeeded, and the provider holds %d successful charges of it", co.key, succeeded)
		} else if st != nil && st.Charge != nil && st.Charge.ProviderChargeId != charges[0].ID {
			rep.problem("key %s: charge %s is the provider's %s, not %s", co.key, chargeID(st), charges[0].ID, st.Charge.ProviderChargeId)
		} else if want := map[bool]string{false: "automatic", true: "manual"}[co.manual]; charges[0].CaptureMethod != want {
			// An authorization the provider captured at once took the
			// money no capture asked for.
			rep.problem("key %s: the provider's charge %s is %s, and the key asked for %s", co.key, charges[0].ID, charges[0].CaptureMethod, want)
		}
	case apiclient.Failed:
		if succeeded != 0 {
			rep.problem("key %s failed, and the provider charged it", co.key)
		}
	}
}

// checkEvents waits until the outbox has sent every event and the receipts
// consumer has issued a receipt per succeeded key, then checks that each
// final key has one event (an authorization two: charge.succeeded and
// charge.authorized), each succeeded one exactly one receipt, of its
// charge, and no failed one a receipt; that each succeeded refund key has
// one refund.succeeded event and nothing else, and a refused one none; and
// that each succeeded capture key has one charge.captured, each succeeded
// void key one charge.voided, and any other capture or void key none.
func (r *run) checkEvents(ctx context.Context, byKey map[string]*checkout) error {
	rep := r.report
	conn, err := pgx.Connect(ctx, r.c.Formation.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var unsent, receipts int
		err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM charge_events WHERE sent_at IS NULL),
			(SELECT count(DISTINCT idempotency_key) FROM receipts)`).Scan(&unsent, &receipts)
		if err != nil {
			return err
		}
		if unsent == 0 && receipts >= rep.Succeeded {
			break
		}
		if time.Now().After(deadline) {
			rep.problem("after 2 minutes, %d events are unsent and %d of %d succeeded keys have a receipt", unsent, receipts, rep.Succeeded)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	// events counts each key's events by type.
	events := map[string]map[string]int{}
	total := 0
	rows, err := conn.Query(ctx, `SELECT idempotency_key, type, count(*) FROM charge_events GROUP BY idempotency_key, type`)
	if err != nil {
		return err
	}
	var key, typ string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&key, &typ, &n}, func() error {
		if events[key] == nil {
			events[key] = map[string]int{}
		}
		events[key][typ] = n
		total += n
		return nil
	}); err != nil {
		return err
	}
	receipts := map[string][]string{}
	rows, err = conn.Query(ctx, `SELECT idempotency_key, charge_id::text FROM receipts`)
	if err != nil {
		return err
	}
	var chargeID string
	if _, err := pgx.ForEachRow(rows, []any{&key, &chargeID}, func() error {
		receipts[key] = append(receipts[key], chargeID)
		return nil
	}); err != nil {
		return err
	}
	for _, co := range byKey {
		if co.final.IsZero() {
			continue
		}
		told := co.answers[0]
		want := map[string]int{payment.EventChargeFailed: 1}
		if told.status == apiclient.Succeeded {
			want = map[string]int{payment.EventChargeSucceeded: 1}
			if co.manual {
				want[payment.EventChargeAuthorized] = 1
			}
		}
		if got := events[co.key]; !maps.Equal(got, want) {
			rep.problem("key %s (%s): events %v in the outbox, want %v", co.key, told.status, got, want)
		}
		got := receipts[co.key]
		rep.Receipts += len(got)
		switch {
		case told.status == apiclient.Failed && len(got) != 0:
			rep.problem("key %s failed and has %d receipts", co.key, len(got))
		case told.status == apiclient.Succeeded && len(got) != 1:
			rep.problem("key %s succeeded and has %d receipts, want exactly 1", co.key, len(got))
		case told.status == apiclient.Succeeded && got[0] != told.id:
			rep.problem("key %s: the receipt is for charge %s, not %s", co.key, got[0], told.id)
		}
	}
	for key := range receipts {
		if byKey[key] == nil {
			rep.problem("a receipt for key %s, which no client sent", key)
		}
	}
	for _, rf := range r.refunds {
		told, ok := rf.told()
		if !ok {
			continue
		}
		var want map[string]int
		switch told.status {
		case apiclient.Succeeded:
			want = map[string]int{payment.EventRefundSucceeded: 1}
		case apiclient.Failed:
			want = map[string]int{payment.EventRefundFailed: 1}
		}
		if got := events[rf.key]; !maps.Equal(got, want) {
			rep.problem("refund key %s (%s): events %v in the outbox, want %v", rf.key, told.status, got, want)
		}
	}
	r.checkCaptureEvents(events)
	return r.checkStream(ctx, total)
}

// checkStream reads the CHARGES stream's copies and messages: three copies
// of each event, each event once (the broker drops a re-publish of an event
// id it has).
func (r *run) checkStream(ctx context.Context, events int) error {
	nc, js, err := r.c.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	info, err := r.streamInfo(ctx, js)
	if err != nil {
		return err
	}
	rep := r.report
	rep.StreamReplicas, rep.StreamMessages, rep.Events = info.Config.Replicas, int(info.State.Msgs), events
	if info.Config.Replicas != 3 {
		rep.problem("stream %s keeps %d copies, want 3", info.Config.Name, info.Config.Replicas)
	}
	if int(info.State.Msgs) != events {
		rep.problem("stream %s holds %d messages for %d events", info.Config.Name, info.State.Msgs, events)
	}
	return nil
}

func (r *run) streamInfo(ctx context.Context, js jetstream.JetStream) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		s, err := js.Stream(ctx, events.Stream)
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = s.Info(ctx); err == nil {
				return info, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stream %s: %w", events.Stream, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
