package graph

import (
	"context"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vektah/gqlparser/v2/ast"

	"chargeonce/merchant"
	"chargeonce/metrics"
	"chargeonce/payment"
)

// storedAnswers keeps the answers this instance gave to replays of settled
// charges (payment.Result.Replay), to give each again, byte for byte, to
// the same request: the same merchant's secret key, the same
// Idempotency-Key header and the same body. A retry storm's later
// requests then cost their HTTP, their authentication and their rate
// limit, as every request does, and one lookup: not the variables'
// validation, the resolvers and the answer's encoding. Each is still
// counted as a replay, in the metrics and the key's history
// (payment.Service.Replayed), and none is given once the key's result has
// expired.
//
// Only an answer that cannot change is kept: a chargeCard alone in its
// document, asking only for immutable fields, with no error. Publishable
// keys' requests (a checkout session's) are always run: a session's state
// and the card-testing rations answer them too.
type storedAnswers struct {
	entries  *lru.Cache[answerKey, storedAnswer]
	payments *payment.Service
	served   prometheus.Counter
}

type answerKey struct {
	merchant     uuid.UUID
	hasHeaderKey bool
	headerKey    string
	body         string
}

type storedAnswer struct {
	answer    []byte
	operation string
	replay    *payment.Replay
}

// maxStoredAnswer bounds what one stored answer holds, its request's body
// included: a checkout's chargeCard takes well under 1 KiB both ways, and
// the bound keeps the cache's memory within maxStoredAnswers × 4 KiB.
const maxStoredAnswer = 4 << 10

// maxStoredAnswers bounds how many answers are kept: a retry storm's keys
// on one instance (its requests in flight when the network failed) in at
// most 20 MiB. None is kept while the payment service keeps no finished
// results (RESULT_CACHE_SIZE=0), for it offers no replay to store.
const maxStoredAnswers = 5_000

// newStoredAnswers returns the cache of answers, or nil (none) without a
// payment service.
func newStoredAnswers(payments *payment.Service, m *metrics.Metrics) *storedAnswers {
	if payments == nil {
		return nil
	}
	entries, err := lru.New[answerKey, storedAnswer](maxStoredAnswers)
	if err != nil {
		panic(err) // only for a size of 0
	}
	return &storedAnswers{entries: entries, payments: payments, served: m.StoredAnswers}
}

// keyOf is the key of st's request with body, false when its answer is
// never stored: not a merchant's secret key, or too large a body.
func (c *storedAnswers) keyOf(st *requestState, body []byte) (answerKey, bool) {
	if c == nil || st.authErr != nil || st.merchant == nil || st.kind != merchant.KeySecret || len(body) > maxStoredAnswer {
		return answerKey{}, false
	}
	return answerKey{merchant: st.merchant.ID, hasHeaderKey: st.hasHeaderKey, headerKey: st.headerKey, body: string(body)}, true
}

// serve answers the request with body from its stored answer, if there
// is one whose result has not expired; false when the request must run.
func (c *storedAnswers) serve(ctx context.Context, w http.ResponseWriter, st *requestState, body []byte) bool {
	k, ok := c.keyOf(st, body)
	if !ok {
		return false
	}
	a, ok := c.entries.Get(k)
	if !ok {
		return false
	}
	if !c.payments.Replayed(ctx, a.replay) {
		c.entries.Remove(k)
		return false
	}
	c.served.Inc()
	st.setOperation(a.operation, "chargeCard")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(a.answer)
	return true
}

// keep stores answer, the answer of the operation oc of the request with
// body, when it is a replay's that cannot change: the resolver offered a
// replay (offerReplay), the document ran nothing else and asked for
// nothing that changes, and nothing went wrong.
func (c *storedAnswers) keep(st *requestState, body []byte, oc *graphql.OperationContext, resp *graphql.Response, answer []byte) {
	k, ok := c.keyOf(st, body)
	if !ok || len(resp.Errors) > 0 || len(k.body)+len(answer) > maxStoredAnswer {
		return
	}
	st.mu.Lock()
	replay, status := st.replay, st.status
	st.mu.Unlock()
	if replay == nil || status != 0 || !unchanging(oc, replay) {
		return
	}
	c.entries.Add(k, storedAnswer{answer: answer, operation: oc.Operation.Name, replay: replay})
}

// offerReplay says that the request's chargeCard answered a replay of a
// settled charge, whose answer may be stored.
func (st *requestState) offerReplay(rp *payment.Replay) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.replay = rp
}

// immutable names, by type, the fields of a settled charge's answer that
// never change. Its refunds and captures (and what they add up to) change
// after it, and are not among them; but see capturedForGood.
var immutable = map[string]map[string]bool{
	"ChargeCardPayload": set("__typename", "idempotencyKey", "status", "replayed", "charge", "failure", "retryAfterMs", "expiresAt", "nextAction"),
	"Charge":            set("__typename", "id", "amount", "currency", "orderId", "providerChargeId", "createdAt"),
	"ChargeFailure":     set("__typename", "code", "message"),
	"NextAction":        set("__typename", "type", "url", "expiresAt"),
}

// capturedForGood adds the fields of a charge whose captures never change
// (payment.Replay.CapturesFixed): an AUTOMATIC charge is CAPTURED in full
// from the start, nothing capturable, no authorization to lapse. What a
// checkout's client asks for.
var capturedForGood = map[string]map[string]bool{
	"Charge": set("captureStatus", "amountCaptured", "amountCapturable", "authorizationExpiresAt"),
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// unchanging reports whether oc is one chargeCard asking only for fields
// that never change in rp's answer, whatever its fragments and directives
// select.
func unchanging(oc *graphql.OperationContext, rp *payment.Replay) bool {
	if oc.Operation.Operation != ast.Mutation {
		return false
	}
	roots := graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Mutation"})
	return len(roots) == 1 && roots[0].Name == "chargeCard" &&
		onlyImmutable(oc, roots[0].Selections, "ChargeCardPayload", rp.CapturesFixed())
}

func onlyImmutable(oc *graphql.OperationContext, sel ast.SelectionSet, typ string, capturesFixed bool) bool {
	for _, f := range graphql.CollectFields(oc, sel, []string{typ}) {
		if !immutable[typ][f.Name] && !(capturesFixed && capturedForGood[typ][f.Name]) {
			return false
		}
		if len(f.Selections) > 0 && !onlyImmutable(oc, f.Selections, f.Definition.Type.Name(), capturesFixed) {
			return false
		}
	}
	return true
}
