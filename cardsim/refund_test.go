package cardsim_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/cardsim"
	"chargeonce/internal/testlog"
)

// refund mirrors the wire form of a refund.
type refund struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	Charge         string            `json:"charge"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	Reason         *string           `json:"reason"`
	FailureCode    *string           `json:"failure_code"`
	FailureMessage *string           `json:"failure_message"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
	SettlesAt      int64             `json:"settles_at"`
}

type chargeRefunded struct {
	AmountRefunded int64 `json:"amount_refunded"`
}

// settleQuickly is the refund settle time of tests that wait for a pending
// refund to end; long enough that a read right after the create still
// finds it pending, even under -race.
const settleQuickly = time.Second

// newCharge charges paymentMethod 1999 USD and returns the charge's id.
func (s *sim) newCharge(paymentMethod string) string {
	s.t.Helper()
	resp, raw := s.mustPost(uniqueKey(s.t), chargeBody(paymentMethod))
	if resp.StatusCode == http.StatusPaymentRequired {
		return decode[errorBody](s.t, raw).Error.Charge
	}
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	return decode[charge](s.t, raw).ID
}

func refundBody(chargeID string, amount int64) map[string]any {
	body := map[string]any{
		"charge":   chargeID,
		"reason":   "requested_by_customer",
		"metadata": map[string]string{"chargeonce_kind": "refund", "merchant": "demo"},
	}
	if amount > 0 {
		body["amount"] = amount
	}
	return body
}

// postRefund sends POST /v1/refunds and requires a JSON answer.
func (s *sim) postRefund(key string, body any) (*http.Response, []byte) {
	s.t.Helper()
	resp, raw, err := s.postTo("/v1/refunds", key, body)
	require.NoError(s.t, err)
	require.Equal(s.t, "application/json", resp.Header.Get("Content-Type"))
	return resp, raw
}

// refund refunds amount (0: what remains) of chargeID under a fresh key and
// requires that it is accepted.
func (s *sim) refund(chargeID string, amount int64) refund {
	s.t.Helper()
	resp, raw := s.postRefund(uniqueKey(s.t), refundBody(chargeID, amount))
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	return decode[refund](s.t, raw)
}

// refused requires that refunding amount of chargeID is refused with code.
func (s *sim) refused(chargeID string, amount int64, code string) {
	s.t.Helper()
	resp, raw := s.postRefund(uniqueKey(s.t), refundBody(chargeID, amount))
	require.Equal(s.t, http.StatusBadRequest, resp.StatusCode, string(raw))
	e := decode[errorBody](s.t, raw)
	require.Equal(s.t, "invalid_request_error", e.Error.Type)
	require.Equal(s.t, code, e.Error.Code)
	require.Equal(s.t, chargeID, e.Error.Charge)
	require.NotEmpty(s.t, e.Error.Message)
}

func (s *sim) getRefund(id string) refund {
	s.t.Helper()
	resp, raw := s.get("/v1/refunds/" + url.PathEscape(id))
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	return decode[refund](s.t, raw)
}

func (s *sim) listRefunds(query url.Values) []refund {
	s.t.Helper()
	resp, raw := s.get("/v1/refunds?" + query.Encode())
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	l := decode[struct {
		Object string   `json:"object"`
		Data   []refund `json:"data"`
	}](s.t, raw)
	require.Equal(s.t, "list", l.Object)
	require.NotNil(s.t, l.Data, "data must be an array, never null")
	return l.Data
}

// amountRefunded is the charge's amount_refunded, as GET /v1/charges/{id}
// answers it.
func (s *sim) amountRefunded(chargeID string) int64 {
	s.t.Helper()
	resp, raw := s.get("/v1/charges/" + chargeID)
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	return decode[chargeRefunded](s.t, raw).AmountRefunded
}

// storedRefundStatus is the refund's status in the database itself.
func (s *sim) storedRefundStatus(id string) string {
	s.t.Helper()
	var status string
	require.NoError(s.t, s.pool.QueryRow(s.t.Context(), "SELECT status FROM cardsim.refunds WHERE id = $1", id).Scan(&status))
	return status
}

func (s *sim) refundRows(query string, args ...any) int {
	s.t.Helper()
	var n int
	require.NoError(s.t, s.pool.QueryRow(s.t.Context(), "SELECT count(*) FROM cardsim.refunds "+query, args...).Scan(&n))
	return n
}

// failRefund presses the control that fails refund id.
func (s *sim) failRefund(id string) (*http.Response, []byte) {
	s.t.Helper()
	resp, raw := s.send(http.MethodPost, s.srv.URL+"/v1/refunds/"+url.PathEscape(id)+"/fail", "", "", nil)
	return resp, []byte(raw)
}

func TestCreateRefund_WithoutAmount_RefundsTheWholeCharge(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	id := s.newCharge("pm_card_visa")
	require.Zero(t, s.amountRefunded(id))
	key := uniqueKey(t)
	before := time.Now().Unix()
	resp, raw := s.postRefund(key, refundBody(id, 0))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.Empty(t, resp.Header.Get("Idempotent-Replayed"))

	r := decode[refund](t, raw)
	require.True(t, strings.HasPrefix(r.ID, "re_"), r.ID)
	require.Len(t, r.ID, len("re_")+24)
	require.Equal(t, "refund", r.Object)
	require.Equal(t, int64(1999), r.Amount)
	require.Equal(t, id, r.Charge)
	require.Equal(t, "USD", r.Currency)
	require.Equal(t, "succeeded", r.Status)
	require.Equal(t, "requested_by_customer", *r.Reason)
	require.Nil(t, r.FailureCode)
	require.Nil(t, r.FailureMessage)
	require.Equal(t, key, r.IdempotencyKey)
	require.Equal(t, map[string]string{"chargeonce_kind": "refund", "merchant": "demo"}, r.Metadata)
	require.GreaterOrEqual(t, r.Created, before)
	require.Equal(t, r.Created, r.SettlesAt, "final at once")
	require.Equal(t, r, s.getRefund(r.ID))
	require.Equal(t, int64(1999), s.amountRefunded(id))

	s.refused(id, 0, "charge_already_refunded")
	s.refused(id, 1, "amount_too_large")
	require.Equal(t, 1, s.refundRows("WHERE charge_id = $1", id), "a refusal stores nothing")
}

func TestCreateRefund_Partial_NeverMoreThanTheCharge(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	id := s.newCharge("pm_card_mastercard")
	require.Equal(t, int64(1000), s.refund(id, 1000).Amount)
	s.refused(id, 1000, "amount_too_large")
	require.Equal(t, int64(1000), s.amountRefunded(id))
	require.Equal(t, int64(999), s.refund(id, 0).Amount, "what remains")
	require.Equal(t, int64(1999), s.amountRefunded(id))
	s.refused(id, 1, "amount_too_large")
}

func TestCreateRefund_ChargeThatDidNotSucceed_IsRefused(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	declined := s.newCharge("pm_card_chargeDeclined")
	s.refused(declined, 0, "charge_not_refundable")
	resp, raw := s.mustPost(uniqueKey(t), authenticationBody(shopReturnURL))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	s.refused(decode[charge](t, raw).ID, 100, "charge_not_refundable")
	s.refused("ch_doesNotExist", 100, "resource_missing")
	require.Zero(t, s.refundRows(""))
}

func TestCreateRefund_SameKey_ReplaysTheRefund(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	id := s.newCharge("pm_card_visa")
	key := uniqueKey(t)
	resp, first := s.postRefund(key, refundBody(id, 0))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(first))

	// The charge is now refunded in full, and yet the key replays its refund.
	again := fmt.Sprintf(`{"metadata":{"merchant":"demo","chargeonce_kind":"refund"},"reason":"requested_by_customer","charge":%q}`, id)
	replay, raw := s.postRefund(key, again)
	require.Equal(t, http.StatusOK, replay.StatusCode, string(raw))
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first, raw)
	require.Equal(t, 1, s.refundRows("WHERE idempotency_key = $1", key))
}

func TestCreateRefund_SameKeyOtherParameters_Returns409(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	other := s.newCharge("pm_card_visa")
	for _, tt := range []struct {
		name   string
		change func(body map[string]any)
	}{
		{"charge", func(b map[string]any) { b["charge"] = other }},
		{"amount given", func(b map[string]any) { b["amount"] = 1999 }},
		{"reason", func(b map[string]any) { b["reason"] = "duplicate" }},
		{"reason null", func(b map[string]any) { delete(b, "reason") }},
		{"metadata", func(b map[string]any) { b["metadata"] = map[string]string{"merchant": "other"} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := s.newCharge("pm_card_visa")
			key := uniqueKey(t)
			resp, raw := s.postRefund(key, refundBody(id, 0))
			require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
			first := decode[refund](t, raw)

			body := refundBody(id, 0)
			tt.change(body)
			resp, raw = s.postRefund(key, body)
			require.Equal(t, http.StatusConflict, resp.StatusCode, string(raw))
			e := decode[errorBody](t, raw)
			require.Equal(t, "idempotency_error", e.Error.Type)
			require.Equal(t, "idempotency_key_reused", e.Error.Code)
			require.Equal(t, []refund{first}, s.listRefunds(url.Values{"idempotency_key": {key}}))
		})
	}
}

// TestCreateRefund_ManyConcurrently_NeverRefundMoreThanTheCharge: of many
// refunds of one charge at once, under distinct keys, exactly those that fit
// in its amount are made, whatever the interleaving.
func TestCreateRefund_ManyConcurrently_NeverRefundMoreThanTheCharge(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	id := s.newCharge("pm_card_visa") // 1999
	const n = 60
	statuses := make([]int, n)
	codes := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			resp, raw, err := s.postTo("/v1/refunds", fmt.Sprintf("%s-%d", uniqueKey(t), i), refundBody(id, 100))
			if !assert.NoError(t, err) {
				return
			}
			statuses[i] = resp.StatusCode
			if resp.StatusCode != http.StatusOK {
				codes[i] = decode[errorBody](t, raw).Error.Code
			}
		})
	}
	close(start)
	wg.Wait()

	made := 0
	for i, status := range statuses {
		switch status {
		case http.StatusOK:
			made++
		case http.StatusBadRequest:
			require.Equal(t, "amount_too_large", codes[i])
		default:
			t.Fatalf("refund %d: status %d", i, status)
		}
	}
	require.Equal(t, 19, made, "19 refunds of 100 fit in 1999")
	require.Equal(t, 19, s.refundRows("WHERE charge_id = $1", id))
	require.Equal(t, int64(1900), s.amountRefunded(id))
}

func TestCreateRefund_SameKeyConcurrently_StoresOneRefund(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	id := s.newCharge("pm_card_visa")
	key := uniqueKey(t)
	const n = 50
	bodies := make([][]byte, n)
	fresh := make([]bool, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			resp, raw, err := s.postTo("/v1/refunds", key, refundBody(id, 0))
			if !assert.NoError(t, err) || !assert.Equal(t, http.StatusOK, resp.StatusCode, string(raw)) {
				return
			}
			bodies[i], fresh[i] = raw, resp.Header.Get("Idempotent-Replayed") == ""
		})
	}
	close(start)
	wg.Wait()
	first := 0
	for i := range n {
		require.Equal(t, bodies[0], bodies[i], "every answer is the same refund")
		if fresh[i] {
			first++
		}
	}
	require.Equal(t, 1, first, "exactly one answer is the first, the others are replays")
	require.Equal(t, 1, s.refundRows("WHERE idempotency_key = $1", key))
}

func TestCreateRefund_InvalidRequest_Returns400AndStoresNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	id := s.newCharge("pm_card_visa")
	valid := fmt.Sprintf(`{"charge":%q}`, id)
	for _, tt := range []struct {
		name  string
		noKey bool
		body  string
		code  string
	}{
		{name: "missing key", noKey: true, body: valid, code: "idempotency_key_missing"},
		{name: "empty body", body: "", code: "body_invalid"},
		{name: "not JSON", body: "charge=" + id, code: "body_invalid"},
		{name: "two JSON objects", body: valid + valid, code: "body_invalid"},
		{name: "missing charge", body: `{"amount":100}`, code: "charge_missing"},
		{name: "charge as number", body: `{"charge":7}`, code: "charge_invalid"},
		{name: "zero amount", body: fmt.Sprintf(`{"charge":%q,"amount":0}`, id), code: "amount_invalid"},
		{name: "negative amount", body: fmt.Sprintf(`{"charge":%q,"amount":-1}`, id), code: "amount_invalid"},
		{name: "amount too large", body: fmt.Sprintf(`{"charge":%q,"amount":100000000}`, id), code: "amount_invalid"},
		{name: "amount as string", body: fmt.Sprintf(`{"charge":%q,"amount":"100"}`, id), code: "amount_invalid"},
		{name: "reason as number", body: fmt.Sprintf(`{"charge":%q,"reason":1}`, id), code: "reason_invalid"},
		{name: "metadata null value", body: fmt.Sprintf(`{"charge":%q,"metadata":{"a":null}}`, id), code: "metadata_invalid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := ""
			if !tt.noKey {
				key = uniqueKey(t)
			}
			resp, raw := s.postRefund(key, tt.body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
			e := decode[errorBody](t, raw)
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Equal(t, tt.code, e.Error.Code)
			require.NotEmpty(t, e.Error.Message)
		})
	}
	require.Zero(t, s.refundRows(""))
}

func TestRefund_RefundPendingCard_IsPendingThenSucceedsWhenRead(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{RefundSettle: settleQuickly})
	id := s.newCharge("pm_card_refundPending")
	r := s.refund(id, 500)
	require.Equal(t, "pending", r.Status)
	require.Nil(t, r.FailureCode)
	require.GreaterOrEqual(t, r.SettlesAt, r.Created)
	require.Equal(t, "pending", s.getRefund(r.ID).Status)
	require.Zero(t, s.amountRefunded(id), "only a succeeded refund counts as refunded")
	s.refused(id, 1500, "amount_too_large") // a pending refund holds its amount
	second := s.refund(id, 1000)
	require.Equal(t, "pending", second.Status, "every refund of the card is pending")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// The second settles a moment after the first: wait for both.
		assert.Equal(c, "succeeded", s.getRefund(r.ID).Status)
		assert.Equal(c, "succeeded", s.getRefund(second.ID).Status)
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, "succeeded", s.storedRefundStatus(r.ID), "the read made it final for good")
	require.Equal(t, int64(1500), s.amountRefunded(id))
}

func TestRefund_RefundFailsLaterCard_FirstFailsLaterAndGivesItsAmountBack(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{RefundSettle: settleQuickly})
	id := s.newCharge("pm_card_refundFailsLater")
	first := s.refund(id, 0)
	require.Equal(t, "pending", first.Status)
	s.refused(id, 1, "amount_too_large")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := s.listRefunds(url.Values{"charge": {id}})
		if assert.Len(c, got, 1) {
			assert.Equal(c, "failed", got[0].Status)
		}
	}, 10*time.Second, 20*time.Millisecond)
	failed := s.getRefund(first.ID)
	require.Equal(t, "expired_or_canceled_card", *failed.FailureCode)
	require.NotEmpty(t, *failed.FailureMessage)
	require.Equal(t, "failed", s.storedRefundStatus(first.ID))
	require.Zero(t, s.amountRefunded(id))

	again := s.refund(id, 0)
	require.Equal(t, "succeeded", again.Status, "a later refund of the card succeeds at once")
	require.Equal(t, int64(1999), again.Amount, "the failed refund gave its amount back")
	require.Equal(t, int64(1999), s.amountRefunded(id))
}

func TestFailRefund_SucceededOrPending_FailsAndGivesTheAmountBack(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{RefundSettle: time.Hour})
	id := s.newCharge("pm_card_visa")
	r := s.refund(id, 0)
	require.Equal(t, int64(1999), s.amountRefunded(id))

	resp, raw := s.failRefund(r.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	failed := decode[refund](t, raw)
	require.Equal(t, "failed", failed.Status)
	require.Equal(t, "expired_or_canceled_card", *failed.FailureCode)
	require.Equal(t, failed, s.getRefund(r.ID))
	require.Zero(t, s.amountRefunded(id))

	resp, raw = s.failRefund(r.ID)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
	require.Equal(t, "refund_unexpected_state", decode[errorBody](t, raw).Error.Code)

	pending := s.refund(s.newCharge("pm_card_refundPending"), 0)
	require.Equal(t, "pending", pending.Status)
	resp, raw = s.failRefund(pending.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.Equal(t, "failed", decode[refund](t, raw).Status)

	resp, raw = s.failRefund("re_doesNotExist")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(raw))
	require.Equal(t, "resource_missing", decode[errorBody](t, raw).Error.Code)
}

func TestFailRefund_FromAnotherSite_IsRefused(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	r := s.refund(s.newCharge("pm_card_visa"), 0)
	resp, _ := s.send(http.MethodPost, s.srv.URL+"/v1/refunds/"+r.ID+"/fail", "application/x-www-form-urlencoded", "",
		http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "succeeded", s.storedRefundStatus(r.ID))
}

func TestListRefunds_Filters_ReturnMatchingRefundsNewestFirst(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	c1, c2 := s.newCharge("pm_card_visa"), s.newCharge("pm_card_visa")
	a := s.refund(c1, 100)
	b := s.refund(c1, 200)
	body := refundBody(c2, 0)
	body["metadata"] = map[string]string{"merchant": "bolt"}
	resp, raw := s.postRefund(uniqueKey(t), body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	c := decode[refund](t, raw)

	ids := func(rs []refund) []string {
		out := make([]string, 0, len(rs))
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	require.Equal(t, []string{c.ID, b.ID, a.ID}, ids(s.listRefunds(nil)))
	require.Equal(t, []string{b.ID, a.ID}, ids(s.listRefunds(url.Values{"charge": {c1}})))
	require.Equal(t, []string{b.ID}, ids(s.listRefunds(url.Values{"charge": {c1}, "limit": {"1"}})))
	require.Equal(t, []string{a.ID}, ids(s.listRefunds(url.Values{"idempotency_key": {a.IdempotencyKey}})))
	require.Equal(t, []string{b.ID, a.ID}, ids(s.listRefunds(url.Values{"merchant": {"demo"}})))
	require.Equal(t, []string{c.ID}, ids(s.listRefunds(url.Values{"merchant": {"bolt"}, "charge": {c2}})))
	require.Empty(t, s.listRefunds(url.Values{"charge": {""}}), "an empty filter matches nothing")
	require.Empty(t, s.listRefunds(url.Values{"idempotency_key": {"never-used"}}))

	resp, raw = s.get("/v1/refunds?limit=1001")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
	require.Equal(t, "limit_invalid", decode[errorBody](t, raw).Error.Code)
}

func TestGetRefund_Unknown_Returns404(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	resp, raw := s.get("/v1/refunds/re_doesNotExist")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(raw))
	require.Equal(t, "resource_missing", decode[errorBody](t, raw).Error.Code)
}

func TestRefunds_OtherMethods_Return405(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	for _, tt := range []struct {
		method, path, allow string
	}{
		{http.MethodPut, "/v1/refunds", "GET, HEAD, POST"},
		{http.MethodPost, "/v1/refunds/re_x", "GET, HEAD"},
		{http.MethodGet, "/v1/refunds/re_x/fail", "POST"},
	} {
		req, err := http.NewRequest(tt.method, s.srv.URL+tt.path, nil)
		require.NoError(t, err)
		resp, raw, err := s.do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, string(raw))
		require.Equal(t, tt.allow, resp.Header.Get("Allow"))
		require.Equal(t, "method_not_allowed", decode[errorBody](t, raw).Error.Code)
	}
}

func TestRefunds_Log_NeverHoldsAWholeCardToken(t *testing.T) {
	t.Parallel()
	var logs testlog.Buffer
	s := newSim(t, cardsim.Config{RefundSettle: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	tokens := []string{"pm_card_visa", "pm_card_refundPending", "pm_card_refundFailsLater"}
	for _, token := range tokens {
		id := s.newCharge(token)
		r := s.refund(id, 1000)
		s.refused(id, 1000, "amount_too_large")
		s.getRefund(r.ID)
		s.listRefunds(url.Values{"charge": {id}})
		s.failRefund(r.ID)
	}
	out := logs.String()
	require.Contains(t, out, "cardsim: refund")
	for _, token := range tokens {
		require.NotContains(t, out, token)
	}
}
