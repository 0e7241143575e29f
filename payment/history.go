package payment

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"chargeonce/history"
)

// The engine's share of the history of a key (package history): what it
// notes about an attempt, and how a note reaches the database. A note
// about a write of the ledger's rides in that write (the claim, a
// takeover, a release, the finalizing write: see riding); any other goes
// to the instance's recorder, which batches it.

// note is an entry about a, by ctx's request, at now.
func (s *Service) note(ctx context.Context, a Attempt, typ, detail string) history.Entry {
	return noteOf(ctx, s.cfg.History, a, typ, detail, s.cfg.Now())
}

// noteOf is an entry about a, by ctx's request, written by rec's instance,
// at at.
func noteOf(ctx context.Context, rec *history.Recorder, a Attempt, typ, detail string, at time.Time) history.Entry {
	return history.Entry{Key: keyOf(a), At: at, Type: typ, Detail: detail, Source: rec.Source(ctx)}
}

// keyOf is the key a's history is kept under.
func keyOf(a Attempt) history.Key {
	return history.Key{MerchantID: a.MerchantID, Kind: string(a.Kind), IdempotencyKey: a.IdempotencyKey, AttemptID: a.ID}
}

// sentDetail says which send of a the provider got: its holder's number
// and the provider key, on which the provider deduplicates.
func sentDetail(a Attempt) string {
	return fmt.Sprintf("holder %d sends under provider key %s", a.Fence, a.ProviderKey)
}

// outcomeDetail says what the provider answered, and in how long when
// took is not zero.
func outcomeDetail(o outcome, took time.Duration) string {
	var b strings.Builder
	switch o.State {
	case outcomeSucceeded:
		b.WriteString("succeeded")
	case outcomeFailed:
		fmt.Fprintf(&b, "failed: %s", o.Failure.Code)
	case outcomePending:
		b.WriteString("pending")
	case outcomeWaiting:
		b.WriteString("requires the shopper to authenticate")
	}
	if o.ProviderID != "" {
		fmt.Fprintf(&b, " (%s)", o.ProviderID)
	}
	if took > 0 {
		fmt.Fprintf(&b, " in %d ms", took.Milliseconds())
	}
	return b.String()
}

// finalStatus is the status a finalizing write of o gives.
func finalStatus(o outcome) Status {
	if o.succeeded() {
		return StatusSucceeded
	}
	return StatusFailed
}

// holderName names the holder by in the history.
func holderName(by holder) string {
	if by == byReconciler {
		return "the reconciler"
	}
	return "the request"
}

// ridingKey carries, in the context of a write, the notes that must ride
// in it: written in its transaction (store.inTx) or its statement, or not
// at all when it writes nothing.
type ridingKey struct{}

// riding is the notes a write carries, and whether it wrote them.
type riding struct {
	entries []history.Entry
	written bool
}

// withRiding is ctx carrying entries for the write it is given to.
func withRiding(ctx context.Context, entries ...history.Entry) (context.Context, *riding) {
	r := &riding{entries: entries}
	return context.WithValue(ctx, ridingKey{}, r), r
}

// ridingOf is what ctx's write carries; nil when nothing.
func ridingOf(ctx context.Context) *riding {
	r, _ := ctx.Value(ridingKey{}).(*riding)
	if r == nil || r.written {
		return nil
	}
	return r
}

// mismatch says which fields of the request asked differ from those of
// stored, the request that claimed the key: their names, never their
// values.
func mismatch(stored, asked Terms) string {
	if stored == nil || asked == nil || reflect.TypeOf(stored) != reflect.TypeOf(asked) {
		return "a request of another kind"
	}
	var fields []string
	differingFields(reflect.ValueOf(stored), reflect.ValueOf(asked), &fields)
	if len(fields) == 0 {
		return "the request differs from the first"
	}
	return "fields differ: " + strings.Join(fields, ", ")
}

// differingFields appends the names of the fields of a and b that
// differ; a pointer field is what the attempt made, not what was asked,
// and is skipped.
func differingFields(a, b reflect.Value, out *[]string) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Type.Kind() == reflect.Pointer || strings.HasPrefix(f.Name, "OfProvider") {
			continue
		}
		x, y := a.Field(i), b.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type.NumField() > 0 && f.Type.PkgPath() == t.PkgPath() {
			differingFields(x, y, out)
			continue
		}
		if !x.Equal(y) {
			*out = append(*out, fieldName(f.Name))
		}
	}
}

// fieldName is the API's name of a Go field: paymentMethod, orderId,
// returnUrl, chargeId.
func fieldName(name string) string {
	switch name {
	case "Of":
		return "chargeId"
	}
	for _, suffix := range []string{"ID", "URL"} {
		if s, ok := strings.CutSuffix(name, suffix); ok && s != "" {
			name = s + suffix[:1] + strings.ToLower(suffix[1:])
		}
	}
	return strings.ToLower(name[:1]) + name[1:]
}

// refusedBeforeClaim are the codes of a request refused before any claim
// for a reason about its key's payment, which its history shows; bad
// input, an outage or a refused key are not about the payment.
var refusedBeforeClaim = map[string]bool{
	EORDERPAID: true, ESESSIONPAID: true, ESESSIONEXPIRED: true, ESESSIONLOCKED: true,
	ECHARGENOTFOUND: true, EREFUNDEXCEEDS: true, ECAPTUREEXCEEDS: true, ENOTCAPTURABLE: true,
	EVOIDED: true, ECAPTURED: true, EAUTHEXPIRED: true,
}

// noteRefusal notes, under key, a request of kind that err refused before
// any claim: its code and our message, which names no secret.
func (s *Service) noteRefusal(ctx context.Context, m Merchant, kind Kind, key string, err error) {
	if err == nil {
		return
	}
	var e *Error
	if !errors.As(err, &e) || !refusedBeforeClaim[e.Code] {
		return
	}
	s.cfg.History.Add(history.Entry{
		Key: history.Key{MerchantID: m.ID, Kind: string(kind), IdempotencyKey: key},
		At:  s.cfg.Now(), Type: history.Refused, Detail: e.Code + ": " + e.Message,
		Source: s.cfg.History.Source(ctx),
	})
}

// History is the history of m's key of kind, oldest first (empty when the
// key has none): what happened under it, on every instance. What this
// instance has gathered and not written yet is written first.
func (s *Service) History(ctx context.Context, m Merchant, kind Kind, key string) ([]history.Event, error) {
	if _, ok := operations[kind]; !ok {
		return nil, Invalid("kind", "unknown kind %q", kind)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	if err := s.cfg.History.Flush(ctx); err != nil {
		s.log.WarnContext(ctx, "history: this instance's latest rows are not written yet", "err", err)
	}
	events, err := history.List(ctx, s.store.pool, m.ID, string(kind), key)
	return events, interpretError(err)
}

// KeyHistory is one merchant's history of a key.
type KeyHistory struct {
	Merchant Merchant
	Events   []history.Event
}

// KeyHistories are the histories of key of kind, of every merchant that
// used it, by the merchant's name: the operators' view (`charges show`),
// which names a key alone.
func (s *Service) KeyHistories(ctx context.Context, kind Kind, key string) ([]KeyHistory, error) {
	if _, ok := operations[kind]; !ok {
		return nil, Invalid("kind", "unknown kind %q", kind)
	}
	merchants, err := s.store.historyMerchants(ctx, kind, key)
	if err != nil {
		return nil, err
	}
	out := make([]KeyHistory, len(merchants))
	for i, m := range merchants {
		out[i].Merchant = m
		if out[i].Events, err = s.History(ctx, m, kind, key); err != nil {
			return nil, err
		}
	}
	return out, nil
}
