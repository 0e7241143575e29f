package graph

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vektah/gqlparser/v2/ast"

	"chargeonce/merchant"
	"chargeonce/metrics"
	"chargeonce/payment"
)

// storedAnswers keeps the answers given to replays of settled charges
// (payment.Result.Replay), to give each again, byte for byte, to the same
// request: the same merchant's secret key, the same Idempotency-Key header
// and the same body. An instance keeps its own in memory while it keeps
// finished results (RESULT_CACHE_SIZE), and every instance keeps them in
// the database too (payment.Service.KeepAnswer), where an instance whose
// memory lacks one reads it during a storm of replays (storm). A retry
// storm's later requests then cost their HTTP, their authentication and
// their rate limit, as every request does, and one lookup: not the
// variables' validation, the resolvers and the answer's encoding. Each is
// still counted as a replay, in the metrics and the key's history
// (payment.Service.Replayed), and none is given once the key's result has
// expired.
//
// Only an answer that cannot change is kept: a chargeCard alone in its
// document, asking only for immutable fields, with no error. Publishable
// keys' requests (a checkout session's) are always run: a session's state
// and the card-testing rations answer them too.
type storedAnswers struct {
	// entries are the instance's own; nil while it keeps no finished results.
	entries  *lru.Cache[answerKey, storedAnswer]
	payments *payment.Service
	served   *prometheus.CounterVec
	misses   prometheus.Counter
	storm    storm
}

type answerKey struct {
	merchant     uuid.UUID
	hasHeaderKey bool
	headerKey    string
	body         string
}

// hash identifies k's request among its merchant's, in the database.
func (k answerKey) hash() []byte {
	h := sha256.New()
	if k.hasHeaderKey {
		h.Write([]byte{1})
		_ = binary.Write(h, binary.BigEndian, uint64(len(k.headerKey)))
		h.Write([]byte(k.headerKey))
	} else {
		h.Write([]byte{0})
	}
	h.Write([]byte(k.body))
	return h.Sum(nil)
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

// maxStoredAnswers bounds how many answers an instance keeps in memory: a
// retry storm's keys on one instance (its requests in flight when the
// network failed) in at most 20 MiB.
const maxStoredAnswers = 5_000

// newStoredAnswers returns the stored answers, or nil (none) without a
// payment service.
func newStoredAnswers(payments *payment.Service, m *metrics.Metrics) *storedAnswers {
	if payments == nil {
		return nil
	}
	c := &storedAnswers{payments: payments, served: m.StoredAnswers, misses: m.StoredAnswerMisses}
	if payments.KeepsResults() {
		entries, err := lru.New[answerKey, storedAnswer](maxStoredAnswers)
		if err != nil {
			panic(err) // only for a size of 0
		}
		c.entries = entries
	}
	return c
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
// The instance's memory answers first; the database, in one statement,
// only for a chargeCard's body during a storm of replays, as for most
// fresh charges, and any other request, the read would find nothing.
func (c *storedAnswers) serve(ctx context.Context, w http.ResponseWriter, st *requestState, body []byte) bool {
	k, ok := c.keyOf(st, body)
	if !ok {
		return false
	}
	a, fromMemory := c.memory(k)
	if !fromMemory {
		// Only a chargeCard's answer is ever kept, and its document names it.
		if !c.storm.on() || !bytes.Contains(body, chargeCardName) {
			return false
		}
		kept, found, err := c.payments.StoredAnswer(ctx, k.merchant, k.hash())
		if err != nil || !found {
			// Unreadable (the request's own statements will say why) or not
			// kept: the request runs, and tells the storm what it was.
			c.misses.Inc()
			return false
		}
		a = storedAnswer{answer: kept.Answer, operation: kept.Operation, replay: kept.Replay}
	}
	if !c.payments.Replayed(ctx, a.replay, fromMemory) {
		if fromMemory {
			c.entries.Remove(k)
		}
		return false
	}
	from := metrics.AnswerFromMemory
	if !fromMemory {
		from = metrics.AnswerFromDatabase
		if c.entries != nil {
			c.entries.Add(k, a)
		}
	}
	c.storm.saw(true)
	c.served.WithLabelValues(from).Inc()
	st.setOperation(a.operation, "chargeCard")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(a.answer)
	return true
}

var chargeCardName = []byte("chargeCard")

// memory is the instance's own answer to k's request.
func (c *storedAnswers) memory(k answerKey) (storedAnswer, bool) {
	if c.entries == nil {
		return storedAnswer{}, false
	}
	return c.entries.Get(k)
}

// keep stores answer, the answer of the operation oc of the request with
// body, when it is a replay's that cannot change: the resolver offered a
// replay (offerReplay), the document ran nothing else and asked for
// nothing that changes, and nothing went wrong. A chargeCard tells the
// storm whether it was a replay of a settled charge.
func (c *storedAnswers) keep(st *requestState, body []byte, oc *graphql.OperationContext, resp *graphql.Response, answer []byte) {
	k, ok := c.keyOf(st, body)
	if !ok {
		return
	}
	st.mu.Lock()
	replay, status, root := st.replay, st.status, st.rootField
	st.mu.Unlock()
	if replay == nil {
		if root == "chargeCard" {
			c.storm.saw(false)
		}
		return
	}
	c.storm.saw(true)
	if len(resp.Errors) > 0 || len(k.body)+len(answer) > maxStoredAnswer || status != 0 || !unchanging(oc, replay) {
		return
	}
	if c.entries != nil {
		c.entries.Add(k, storedAnswer{answer: answer, operation: oc.Operation.Name, replay: replay})
	}
	c.payments.KeepAnswer(replay, k.hash(), oc.Operation.Name, answer)
}

// storm says whether the instance's recent chargeCard requests with a
// secret key were mostly replays of settled charges, as after a failover
// or a restart: a read of the database's stored answers then finds most
// requests' answers, and saves each its rendering. Otherwise the read would
// cost most requests, fresh charges, one more statement for nothing. It
// is a count, within [0, stormWindow], of the replays among those
// requests less the others: it climbs while replays are most, falls while
// they are not.
type storm struct{ n atomic.Int32 }

// stormWindow is how far the count goes: the storm is on at half of it.
const stormWindow = 32

// saw counts one request: a replay of a settled charge or not.
func (s *storm) saw(replay bool) {
	for {
		n := s.n.Load()
		m := n - 1
		if replay {
			m = n + 1
		}
		if m < 0 || m > stormWindow || s.n.CompareAndSwap(n, m) {
			return
		}
	}
}

func (s *storm) on() bool { return s.n.Load() >= stormWindow/2 }

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
