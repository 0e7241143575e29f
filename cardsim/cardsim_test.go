package cardsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/cardsim"
	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
)

// charge mirrors the wire form. It cannot tell a null field from a missing
// one: the tests that must decode the body into map[string]json.RawMessage.
type charge struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	Currency           string            `json:"currency"`
	Status             string            `json:"status"`
	PaymentMethod      string            `json:"payment_method"`
	Description        *string           `json:"description"`
	FailureCode        *string           `json:"failure_code"`
	FailureMessage     *string           `json:"failure_message"`
	IdempotencyKey     string            `json:"idempotency_key"`
	Metadata           map[string]string `json:"metadata"`
	Created            int64             `json:"created"`
	ReturnURL          *string           `json:"return_url"`
	CancellationReason *string           `json:"cancellation_reason"`
	NextAction         *nextAction       `json:"next_action"`
}

type nextAction struct {
	Type          string `json:"type"`
	RedirectToURL struct {
		URL       string `json:"url"`
		ReturnURL string `json:"return_url"`
	} `json:"redirect_to_url"`
}

type errorBody struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Charge  string `json:"charge"`
	} `json:"error"`
}

type list struct {
	Object string   `json:"object"`
	Data   []charge `json:"data"`
}

type sim struct {
	t    *testing.T
	srv  *httptest.Server
	pool *pgxpool.Pool
}

func newSim(t *testing.T, cfg cardsim.Config) *sim {
	t.Helper()
	return newSimOn(t, dbtest.NewPool(t, cardsimtest.Schema), cfg)
}

// newSimOn serves the simulator on pool, whose cardsim schema must exist.
func newSimOn(t *testing.T, pool *pgxpool.Pool, cfg cardsim.Config) *sim {
	t.Helper()
	srv := httptest.NewServer(cardsim.NewHandler(pool, cfg))
	t.Cleanup(srv.Close)
	return &sim{t: t, srv: srv, pool: pool}
}

// uniqueKey returns an idempotency key that no other test uses.
func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

func chargeBody(paymentMethod string) map[string]any {
	return map[string]any{
		"amount":         1999,
		"currency":       "USD",
		"payment_method": paymentMethod,
		"description":    "Order 42",
		"metadata":       map[string]string{"client_idempotency_key": "client-1", "merchant": "demo"},
	}
}

// post sends POST /v1/charges; body is JSON-encoded unless it is a string.
func (s *sim) post(key string, body any) (*http.Response, []byte, error) {
	return s.postTo("/v1/charges", key, body)
}

// postTo sends POST path, as post does.
func (s *sim) postTo(path, key string, body any) (*http.Response, []byte, error) {
	var raw []byte
	if str, ok := body.(string); ok {
		raw = []byte(str)
	} else {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(s.t, err)
	}
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+path, bytes.NewReader(raw))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return s.do(req)
}

func (s *sim) do(req *http.Request) (*http.Response, []byte, error) {
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp, body, nil
}

// mustPost is post for requests that must get an HTTP answer.
func (s *sim) mustPost(key string, body any) (*http.Response, []byte) {
	s.t.Helper()
	resp, raw, err := s.post(key, body)
	require.NoError(s.t, err)
	require.Equal(s.t, "application/json", resp.Header.Get("Content-Type"))
	return resp, raw
}

func (s *sim) get(path string) (*http.Response, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
	require.NoError(s.t, err)
	resp, body, err := s.do(req)
	require.NoError(s.t, err)
	require.Equal(s.t, "application/json", resp.Header.Get("Content-Type"))
	return resp, body
}

func (s *sim) list(query url.Values) []charge {
	s.t.Helper()
	resp, body := s.get("/v1/charges?" + query.Encode())
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(body))
	var l list
	require.NoError(s.t, json.Unmarshal(body, &l))
	require.Equal(s.t, "list", l.Object)
	require.NotNil(s.t, l.Data, "data must be an array, never null")
	return l.Data
}

func (s *sim) chargesWithKey(key string) []charge {
	return s.list(url.Values{"idempotency_key": {key}})
}

// rowsWithKey counts the stored charges of key in the database itself.
func (s *sim) rowsWithKey(key string) int {
	s.t.Helper()
	n, err := s.countWithKey(key)
	require.NoError(s.t, err)
	return n
}

// countWithKey is rowsWithKey for an EventuallyWithT condition.
func (s *sim) countWithKey(key string) (int, error) {
	var n int
	err := s.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM cardsim.charges WHERE idempotency_key = $1", key).Scan(&n)
	return n, err
}

func decode[T any](t *testing.T, raw []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(raw, &v), string(raw))
	return v
}

func TestCreateCharge_SucceedingCards_Return200WithSucceededCharge(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	for _, pm := range []string{"pm_card_visa", "pm_card_mastercard"} {
		t.Run(pm, func(t *testing.T) {
			key := uniqueKey(t)
			before := time.Now().Unix()
			resp, raw := s.mustPost(key, chargeBody(pm))
			require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
			require.Empty(t, resp.Header.Get("Idempotent-Replayed"))

			c := decode[charge](t, raw)
			require.Regexp(t, `^ch_[A-Za-z0-9]{24}$`, c.ID)
			require.Equal(t, "charge", c.Object)
			require.Equal(t, int64(1999), c.Amount)
			require.Equal(t, "USD", c.Currency)
			require.Equal(t, "succeeded", c.Status)
			require.Equal(t, pm, c.PaymentMethod)
			require.Equal(t, "Order 42", *c.Description)
			require.Nil(t, c.FailureCode)
			require.Nil(t, c.FailureMessage)
			require.Equal(t, key, c.IdempotencyKey)
			require.Equal(t, map[string]string{"client_idempotency_key": "client-1", "merchant": "demo"}, c.Metadata)
			require.GreaterOrEqual(t, c.Created, before-1)

			// Nullable fields are present as null, not left out.
			fields := decode[map[string]json.RawMessage](t, raw)
			require.JSONEq(t, "null", string(fields["failure_code"]))
			require.JSONEq(t, "null", string(fields["failure_message"]))

			resp, raw = s.get("/v1/charges/" + c.ID)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, c, decode[charge](t, raw))
		})
	}
}

func TestCreateCharge_WithoutDescriptionAndMetadata_ReturnsNullDescriptionAndEmptyMetadata(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	resp, raw := s.mustPost(uniqueKey(t), map[string]any{"amount": 500, "currency": "EUR", "payment_method": "pm_card_visa"})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	fields := decode[map[string]json.RawMessage](t, raw)
	require.JSONEq(t, "null", string(fields["description"]))
	require.JSONEq(t, "{}", string(fields["metadata"]))
}

func TestCreateCharge_DecliningCards_Return402AndStoreFailedCharge(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	tests := []struct {
		paymentMethod string
		code          string
		message       string
	}{
		{"pm_card_chargeDeclined", "card_declined", "Your card was declined."},
		{"pm_card_insufficientFunds", "insufficient_funds", "Your card has insufficient funds."},
	}
	for _, tt := range tests {
		t.Run(tt.paymentMethod, func(t *testing.T) {
			key := uniqueKey(t)
			resp, raw := s.mustPost(key, chargeBody(tt.paymentMethod))
			require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, string(raw))
			e := decode[errorBody](t, raw)
			require.Equal(t, "card_error", e.Error.Type)
			require.Equal(t, tt.code, e.Error.Code)
			require.Equal(t, tt.message, e.Error.Message)
			require.Regexp(t, `^ch_[A-Za-z0-9]{24}$`, e.Error.Charge)

			stored := s.chargesWithKey(key)
			require.Len(t, stored, 1)
			require.Equal(t, e.Error.Charge, stored[0].ID)
			require.Equal(t, "failed", stored[0].Status)
			require.Equal(t, tt.code, *stored[0].FailureCode)
			require.Equal(t, tt.message, *stored[0].FailureMessage)

			// A replay declines again with the same charge, and stores nothing new.
			replay, replayRaw := s.mustPost(key, chargeBody(tt.paymentMethod))
			require.Equal(t, http.StatusPaymentRequired, replay.StatusCode)
			require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
			require.Equal(t, raw, replayRaw)
			require.Equal(t, 1, s.rowsWithKey(key))
		})
	}
}

func TestCreateCharge_SlowCard_WaitsSlowDelayThenSucceeds(t *testing.T) {
	t.Parallel()
	const delay = 200 * time.Millisecond
	s := newSim(t, cardsim.Config{SlowDelay: delay})
	start := time.Now()
	resp, raw := s.mustPost(uniqueKey(t), chargeBody("pm_card_slow"))
	elapsed := time.Since(start)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.Equal(t, "succeeded", decode[charge](t, raw).Status)
	require.GreaterOrEqual(t, elapsed, delay)
}

func TestCreateCharge_SlowCardWithoutDelay_SucceedsAtOnce(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{SlowDelay: 0})
	start := time.Now()
	resp, raw := s.mustPost(uniqueKey(t), chargeBody("pm_card_slow"))
	elapsed := time.Since(start)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.Equal(t, "succeeded", decode[charge](t, raw).Status)
	require.Less(t, elapsed, cardsim.SlowDelayDefault/2, "zero is no delay, not the default")
}

func TestCreateCharge_SlowCardClientGivesUp_ChargeStillStored(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{SlowDelay: 300 * time.Millisecond})
	key := uniqueKey(t)
	raw, err := json.Marshal(chargeBody("pm_card_slow"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/v1/charges", bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	_, _, err = s.do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// The provider finishes the charge although nobody waits for the answer.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := s.countWithKey(key)
		require.NoError(c, err)
		require.Equal(c, 1, n)
	}, 10*time.Second, 20*time.Millisecond)
	stored := s.chargesWithKey(key)
	require.Len(t, stored, 1)
	require.Equal(t, "succeeded", stored[0].Status)
}

func TestCreateCharge_ProviderError_Returns500EveryTimeAndStoresNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	key := uniqueKey(t)
	for range 3 {
		resp, raw := s.mustPost(key, chargeBody("pm_card_providerError"))
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode, string(raw))
		require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
		e := decode[errorBody](t, raw)
		require.Equal(t, "api_error", e.Error.Type)
		require.Equal(t, "provider_error", e.Error.Code)
		require.Empty(t, e.Error.Charge)
	}
	require.Empty(t, s.chargesWithKey(key))
	require.Zero(t, s.rowsWithKey(key))
}

func TestCreateCharge_LostResponse_DropsConnectionAndStoresOneCharge(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	key := uniqueKey(t)
	// The first call and three repeats with the same key.
	for i := range 4 {
		resp, _, err := s.post(key, chargeBody("pm_card_lostResponse"))
		require.Error(t, err, "call %d must fail in transport, not get an HTTP answer", i)
		require.ErrorIs(t, err, io.EOF, "the connection is closed without an answer")
		require.Nil(t, resp)
	}
	require.Equal(t, 1, s.rowsWithKey(key))

	// The reconciler's lookup answers normally.
	stored := s.chargesWithKey(key)
	require.Len(t, stored, 1)
	require.Equal(t, "succeeded", stored[0].Status)
	require.Equal(t, "pm_card_lostResponse", stored[0].PaymentMethod)
	require.Equal(t, key, stored[0].IdempotencyKey)

	resp, raw := s.get("/v1/charges/" + stored[0].ID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, stored[0], decode[charge](t, raw))
}

func TestCreateCharge_LostResponseKeyReusedWithOtherAmount_Returns409(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	key := uniqueKey(t)
	_, _, err := s.post(key, chargeBody("pm_card_lostResponse"))
	require.Error(t, err)

	other := chargeBody("pm_card_lostResponse")
	other["amount"] = 2000
	resp, raw := s.mustPost(key, other)
	require.Equal(t, http.StatusConflict, resp.StatusCode, string(raw))
	require.Equal(t, 1, s.rowsWithKey(key))
}

func TestCreateCharge_UnknownPaymentMethod_Returns400AndStoresNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	key := uniqueKey(t)
	resp, raw := s.mustPost(key, chargeBody("pm_card_amex"))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
	e := decode[errorBody](t, raw)
	require.Equal(t, "invalid_request_error", e.Error.Type)
	require.Equal(t, "payment_method_unknown", e.Error.Code)
	require.Zero(t, s.rowsWithKey(key))
}

func TestCreateCharge_SameKeySameRequest_ReplaysFirstCharge(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	key := uniqueKey(t)
	first, firstRaw := s.mustPost(key, chargeBody("pm_card_visa"))
	require.Equal(t, http.StatusOK, first.StatusCode, string(firstRaw))
	require.Empty(t, first.Header.Get("Idempotent-Replayed"))

	// Same parameters in another order and spelling of the JSON: same request.
	again := `{"metadata":{"merchant":"demo","client_idempotency_key":"client-1"},"description":"Order 42",
		"payment_method":"pm_card_visa","currency":"USD","amount":1999}`
	replay, replayRaw := s.mustPost(key, again)
	require.Equal(t, http.StatusOK, replay.StatusCode, string(replayRaw))
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Equal(t, decode[charge](t, firstRaw).ID, decode[charge](t, replayRaw).ID)
	require.Equal(t, firstRaw, replayRaw)
	require.Equal(t, 1, s.rowsWithKey(key))
}

func TestCreateCharge_SameKeyOtherParameters_Returns409AndStoresNothingNew(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	tests := []struct {
		name   string
		change func(body map[string]any)
	}{
		{"amount", func(b map[string]any) { b["amount"] = 2000 }},
		{"currency", func(b map[string]any) { b["currency"] = "EUR" }},
		{"payment_method", func(b map[string]any) { b["payment_method"] = "pm_card_mastercard" }},
		{"description", func(b map[string]any) { b["description"] = "Order 43" }},
		{"description null", func(b map[string]any) { delete(b, "description") }},
		{"metadata value", func(b map[string]any) {
			b["metadata"] = map[string]string{"client_idempotency_key": "client-1", "merchant": "other"}
		}},
		{"metadata extra key", func(b map[string]any) {
			b["metadata"] = map[string]string{"client_idempotency_key": "client-1", "merchant": "demo", "x": ""}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := uniqueKey(t)
			resp, raw := s.mustPost(key, chargeBody("pm_card_visa"))
			require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
			first := decode[charge](t, raw)

			body := chargeBody("pm_card_visa")
			tt.change(body)
			resp, raw = s.mustPost(key, body)
			require.Equal(t, http.StatusConflict, resp.StatusCode, string(raw))
			e := decode[errorBody](t, raw)
			require.Equal(t, "idempotency_error", e.Error.Type)
			require.Equal(t, "idempotency_key_reused", e.Error.Code)

			stored := s.chargesWithKey(key)
			require.Len(t, stored, 1)
			require.Equal(t, first, stored[0])
		})
	}
}

func TestCreateCharge_SameKeyConcurrently_StoresOneCharge(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	key := uniqueKey(t)
	const n = 100
	type answer struct {
		status   int
		replayed string
		body     []byte
		err      error
	}
	answers := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			resp, body, err := s.post(key, chargeBody("pm_card_visa"))
			if err != nil {
				answers[i] = answer{err: err}
				return
			}
			answers[i] = answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed"), body: body}
		})
	}
	close(start)
	wg.Wait()

	ids := map[string]int{}
	fresh := 0
	for _, a := range answers {
		require.NoError(t, a.err)
		require.Equal(t, http.StatusOK, a.status, string(a.body))
		require.Equal(t, answers[0].body, a.body, "every answer must be the same charge")
		ids[decode[charge](t, a.body).ID]++
		if a.replayed == "" {
			fresh++
		}
	}
	require.Len(t, ids, 1)
	require.Equal(t, 1, fresh, "exactly one answer is the first, the others are replays")
	require.Equal(t, 1, s.rowsWithKey(key))
}

func TestCreateCharge_InvalidRequest_Returns400AndStoresNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	valid := `{"amount":1999,"currency":"USD","payment_method":"pm_card_visa"}`
	tests := []struct {
		name    string
		noKey   bool
		key     string // replaces the test's unique key when set
		body    string
		code    string
		headers http.Header
	}{
		{name: "missing key", noKey: true, body: valid, code: "idempotency_key_missing"},
		{name: "empty key", headers: http.Header{"Idempotency-Key": {""}}, body: valid, code: "idempotency_key_invalid"},
		{name: "key of 256 characters", key: strings.Repeat("k", 256), body: valid, code: "idempotency_key_invalid"},
		{name: "key given twice", headers: http.Header{"Idempotency-Key": {"a", "b"}}, body: valid, code: "idempotency_key_invalid"},
		{name: "empty body", body: "", code: "body_invalid"},
		{name: "not JSON", body: "amount=1999", code: "body_invalid"},
		{name: "JSON array", body: "[]", code: "body_invalid"},
		{name: "two JSON objects", body: valid + valid, code: "body_invalid"},
		{name: "missing amount", body: `{"currency":"USD","payment_method":"pm_card_visa"}`, code: "amount_invalid"},
		{name: "zero amount", body: `{"amount":0,"currency":"USD","payment_method":"pm_card_visa"}`, code: "amount_invalid"},
		{name: "negative amount", body: `{"amount":-5,"currency":"USD","payment_method":"pm_card_visa"}`, code: "amount_invalid"},
		{name: "amount too large", body: `{"amount":100000000,"currency":"USD","payment_method":"pm_card_visa"}`, code: "amount_invalid"},
		{name: "fractional amount", body: `{"amount":19.99,"currency":"USD","payment_method":"pm_card_visa"}`, code: "amount_invalid"},
		{name: "amount as string", body: `{"amount":"1999","currency":"USD","payment_method":"pm_card_visa"}`, code: "amount_invalid"},
		{name: "missing currency", body: `{"amount":1999,"payment_method":"pm_card_visa"}`, code: "currency_invalid"},
		{name: "two-letter currency", body: `{"amount":1999,"currency":"US","payment_method":"pm_card_visa"}`, code: "currency_invalid"},
		{name: "four-letter currency", body: `{"amount":1999,"currency":"USDD","payment_method":"pm_card_visa"}`, code: "currency_invalid"},
		{name: "currency with digit", body: `{"amount":1999,"currency":"U5D","payment_method":"pm_card_visa"}`, code: "currency_invalid"},
		{name: "missing payment method", body: `{"amount":1999,"currency":"USD"}`, code: "payment_method_missing"},
		{name: "empty payment method", body: `{"amount":1999,"currency":"USD","payment_method":""}`, code: "payment_method_missing"},
		{name: "payment method as number", body: `{"amount":1999,"currency":"USD","payment_method":4242}`, code: "payment_method_invalid"},
		{name: "description as number", body: `{"amount":1999,"currency":"USD","payment_method":"pm_card_visa","description":7}`, code: "description_invalid"},
		{name: "metadata as array", body: `{"amount":1999,"currency":"USD","payment_method":"pm_card_visa","metadata":["a"]}`, code: "metadata_invalid"},
		{name: "metadata number value", body: `{"amount":1999,"currency":"USD","payment_method":"pm_card_visa","metadata":{"a":1}}`, code: "metadata_invalid"},
		{name: "metadata null value", body: `{"amount":1999,"currency":"USD","payment_method":"pm_card_visa","metadata":{"a":null}}`, code: "metadata_invalid"},
		{name: "metadata NUL character", body: `{"amount":1999,"currency":"USD","payment_method":"pm_card_visa","metadata":{"a":"\u0000"}}`, code: "metadata_invalid"},
		{name: "unknown payment method", body: `{"amount":1999,"currency":"USD","payment_method":"pm_card_unknown"}`, code: "payment_method_unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := uniqueKey(t)
			if tt.key != "" {
				key = tt.key
			}
			req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/v1/charges", strings.NewReader(tt.body))
			require.NoError(t, err)
			if !tt.noKey && tt.headers == nil {
				req.Header.Set("Idempotency-Key", key)
			}
			for name, values := range tt.headers {
				req.Header[name] = values
			}
			resp, raw, err := s.do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			e := decode[errorBody](t, raw)
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Equal(t, tt.code, e.Error.Code)
			require.NotEmpty(t, e.Error.Message)
			require.Zero(t, s.rowsWithKey(key))
		})
	}
}

func TestCreateCharge_BoundaryValues_Accepted(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	tests := []struct {
		name string
		key  string
		body map[string]any
		want func(t *testing.T, c charge)
	}{
		{"amount 1", "", map[string]any{"amount": 1, "currency": "USD", "payment_method": "pm_card_visa"},
			func(t *testing.T, c charge) { require.Equal(t, int64(1), c.Amount) }},
		{"amount 99999999", "", map[string]any{"amount": 99999999, "currency": "USD", "payment_method": "pm_card_visa"},
			func(t *testing.T, c charge) { require.Equal(t, int64(99999999), c.Amount) }},
		{"key of 255 characters", strings.Repeat("é", 255), map[string]any{"amount": 5, "currency": "USD", "payment_method": "pm_card_visa"},
			func(t *testing.T, c charge) { require.Equal(t, strings.Repeat("é", 255), c.IdempotencyKey) }},
		{"lower-case currency is upper-cased", "", map[string]any{"amount": 5, "currency": "eur", "payment_method": "pm_card_visa"},
			func(t *testing.T, c charge) { require.Equal(t, "EUR", c.Currency) }},
		{"empty description", "", map[string]any{"amount": 5, "currency": "USD", "payment_method": "pm_card_visa", "description": ""},
			func(t *testing.T, c charge) { require.NotNil(t, c.Description); require.Empty(t, *c.Description) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := tt.key
			if key == "" {
				key = uniqueKey(t)
			}
			resp, raw := s.mustPost(key, tt.body)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
			tt.want(t, decode[charge](t, raw))
			require.Equal(t, 1, s.rowsWithKey(key))
		})
	}
}

func TestListCharges_Filters_ReturnMatchingChargesNewestFirst(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	create := func(merchant, clientKey, pm string) charge {
		key := uniqueKey(t)
		body := chargeBody(pm)
		body["metadata"] = map[string]string{"merchant": merchant, "client_idempotency_key": clientKey}
		resp, raw := s.mustPost(key, body)
		if resp.StatusCode == http.StatusPaymentRequired {
			id := decode[errorBody](t, raw).Error.Charge
			_, raw = s.get("/v1/charges/" + id)
		} else {
			require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
		}
		return decode[charge](t, raw)
	}
	a1 := create("acme", "a-1", "pm_card_visa")
	a2 := create("acme", "a-2", "pm_card_chargeDeclined")
	b1 := create("bolt", "b-1", "pm_card_mastercard")
	a3 := create("acme", "a-1", "pm_card_visa") // the same client key, another provider key

	ids := func(cs []charge) []string {
		out := make([]string, 0, len(cs))
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	require.Equal(t, []string{b1.ID}, ids(s.list(url.Values{"merchant": {"bolt"}})))
	require.Equal(t, []string{a3.ID, a2.ID, a1.ID}, ids(s.list(url.Values{"merchant": {"acme"}})))
	require.Equal(t, []string{a3.ID, a1.ID}, ids(s.list(url.Values{"client_idempotency_key": {"a-1"}})))
	require.Equal(t, []string{a2.ID}, ids(s.list(url.Values{"idempotency_key": {a2.IdempotencyKey}})))
	require.Equal(t, []string{a3.ID}, ids(s.list(url.Values{"merchant": {"acme"}, "client_idempotency_key": {"a-1"}, "limit": {"1"}})),
		"filters combine, and limit keeps the newest")
	require.Equal(t, []string{a3.ID, b1.ID, a2.ID, a1.ID}, ids(s.list(nil)))
	require.Equal(t, []string{a3.ID, b1.ID}, ids(s.list(url.Values{"limit": {"2"}})))
	require.Empty(t, s.list(url.Values{"merchant": {"nobody"}}))
	// An empty filter matches nothing rather than everything.
	require.Empty(t, s.list(url.Values{"idempotency_key": {""}}))
	require.Equal(t, a2, s.list(url.Values{"idempotency_key": {a2.IdempotencyKey}})[0])
}

func TestListCharges_NoLimit_ReturnsAtMost100(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	_, err := s.pool.Exec(context.Background(), `
		INSERT INTO cardsim.charges (id, idempotency_key, request_hash, amount, currency, payment_method, status)
		SELECT 'ch_bulk' || i, 'bulk-' || i, '\x00', 100, 'USD', 'pm_card_visa', 'succeeded'
		FROM generate_series(1, 1001) AS i`)
	require.NoError(t, err)
	require.Len(t, s.list(nil), 100)
	require.Len(t, s.list(url.Values{"limit": {"1000"}}), 1000)
	require.Len(t, s.list(url.Values{"limit": {"7"}}), 7)
}

func TestListCharges_InvalidLimit_Returns400(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	for _, limit := range []string{"0", "-1", "1001", "abc", "", "1.5"} {
		t.Run(limit, func(t *testing.T) {
			t.Parallel()
			resp, raw := s.get("/v1/charges?" + url.Values{"limit": {limit}}.Encode())
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
			e := decode[errorBody](t, raw)
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Equal(t, "limit_invalid", e.Error.Code)
		})
	}
}

func TestGetCharge_Unknown_Returns404(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	resp, raw := s.get("/v1/charges/ch_doesNotExist")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, string(raw))
	e := decode[errorBody](t, raw)
	require.Equal(t, "invalid_request_error", e.Error.Type)
	require.Equal(t, "resource_missing", e.Error.Code)
}

func TestCharges_OtherMethods_Return405(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	tests := []struct {
		method, path, allow string
	}{
		{http.MethodPut, "/v1/charges", "GET, HEAD, POST"},
		{http.MethodDelete, "/v1/charges", "GET, HEAD, POST"},
		{http.MethodPatch, "/v1/charges", "GET, HEAD, POST"},
		{http.MethodPost, "/v1/charges/ch_x", "GET, HEAD"},
		{http.MethodDelete, "/v1/charges/ch_x", "GET, HEAD"},
		{http.MethodGet, "/v1/charges/ch_x/cancel", "POST"},
		{http.MethodPost, "/authenticate/ch_x", "GET, HEAD"},
		{http.MethodGet, "/authenticate/ch_x/complete", "POST"},
		{http.MethodGet, "/authenticate/ch_x/fail", "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(tt.method, s.srv.URL+tt.path, nil)
			require.NoError(t, err)
			resp, raw, err := s.do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, string(raw))
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Equal(t, tt.allow, resp.Header.Get("Allow"))
			require.Equal(t, "method_not_allowed", decode[errorBody](t, raw).Error.Code)
		})
	}
}

func TestHandler_MountedUnderProviderPrefix_ServesCharges(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t, cardsimtest.Schema)
	// As chargeonce's server mounts it.
	mux := http.NewServeMux()
	mux.Handle("/provider/", http.StripPrefix("/provider", cardsim.NewHandler(pool, cardsim.Config{})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/provider/v1/charges",
		strings.NewReader(`{"amount":1999,"currency":"USD","payment_method":"pm_card_visa"}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", uniqueKey(t))
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var c charge
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&c))

	got, err := srv.Client().Get(srv.URL + "/provider/v1/charges/" + c.ID)
	require.NoError(t, err)
	defer got.Body.Close()
	require.Equal(t, http.StatusOK, got.StatusCode)
}
