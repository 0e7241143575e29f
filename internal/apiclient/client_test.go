package apiclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serve answers every request with status and body, and records the last
// request's headers.
func serve(t *testing.T, status int, body string, got *http.Header) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return New(srv.URL, "k3y", nil)
}

func TestChargeCard_ServiceUnavailable_IsAnErrorWithCodeStatusAndHint(t *testing.T) {
	t.Parallel()
	var got http.Header
	c := serve(t, http.StatusServiceUnavailable,
		`{"errors":[{"message":"the payment database is unavailable","extensions":{"code":"SERVICE_UNAVAILABLE","retryAfterMs":1000}}],"data":null}`, &got)
	res, err := c.With("Idempotency-Key", "abc").ChargeCard(context.Background(), "abc", ChargeCardInput{Amount: new(1), Currency: new("USD"), PaymentMethod: "pm_card_visa"})
	require.Nil(t, res)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "SERVICE_UNAVAILABLE", e.Code())
	require.Equal(t, "SERVICE_UNAVAILABLE", Code(err))
	require.Equal(t, http.StatusServiceUnavailable, e.Status)
	require.Equal(t, time.Second, e.RetryAfter())
	require.Equal(t, "1", e.RetryAfterHeader)
	require.Equal(t, "Bearer k3y", got.Get("Authorization"))
	require.Equal(t, "abc", got.Get("Idempotency-Key"))
	require.Empty(t, c.Header, "With leaves the client it copies alone")
}

func TestChargeStatus_UnknownKey_IsNil(t *testing.T) {
	t.Parallel()
	var got http.Header
	c := serve(t, http.StatusOK, `{"data":{"chargeStatus":null}}`, &got)
	res, err := c.ChargeStatus(context.Background(), "never")
	require.NoError(t, err)
	require.Nil(t, res)
}

func TestChargeCard_NotGraphQL_IsAnErrorThatQuotesTheAnswer(t *testing.T) {
	t.Parallel()
	var got http.Header
	c := serve(t, http.StatusBadGateway, `<html>bad gateway</html>`, &got)
	_, err := c.ChargeCard(context.Background(), "k", ChargeCardInput{})
	require.ErrorContains(t, err, "HTTP 502")
	require.ErrorContains(t, err, "bad gateway")
	require.Empty(t, Code(err))
}

func TestChargeCardRaw_SendsTheInputAsGiven(t *testing.T) {
	t.Parallel()
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		_, _ = w.Write([]byte(`{"data":{"chargeCard":{"idempotencyKey":"k","status":"SUCCEEDED","replayed":true}}}`))
	}))
	t.Cleanup(srv.Close)
	res, err := New(srv.URL, "k3y", nil).ChargeCardRaw(context.Background(), "k", map[string]any{"amount": "ten"})
	require.NoError(t, err)
	require.Equal(t, Succeeded, res.Status)
	require.True(t, res.Replayed)
	require.Contains(t, string(body), `"input":{"amount":"ten"}`)
	require.Contains(t, string(body), `"idempotencyKey":"k"`)
}

func TestRefundCharge_ExceedsCharge_IsAnErrorThatSaysWhatRemains(t *testing.T) {
	t.Parallel()
	var got http.Header
	c := serve(t, http.StatusOK,
		`{"errors":[{"message":"the refund exceeds what remains refundable of the charge (40); nothing was refunded","extensions":{"code":"REFUND_EXCEEDS_CHARGE","field":"input.amount","refundable":40}}],"data":null}`, &got)
	res, err := c.RefundCharge(context.Background(), "r1", RefundInput{ChargeId: "c1", Amount: new(60)})
	require.Nil(t, res)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "REFUND_EXCEEDS_CHARGE", e.Code())
	refundable, ok := e.Refundable()
	require.True(t, ok)
	require.EqualValues(t, 40, refundable)
}

func TestRefundStatus_UnknownKey_IsNil(t *testing.T) {
	t.Parallel()
	var got http.Header
	c := serve(t, http.StatusOK, `{"data":{"refundStatus":null}}`, &got)
	res, err := c.RefundStatus(context.Background(), "never")
	require.NoError(t, err)
	require.Nil(t, res)
	require.False(t, res.Final())
	require.Zero(t, res.RetryAfter())
}

func TestProviderRefunds_AsksForTheChargesRefundsOfTheMerchant(t *testing.T) {
	t.Parallel()
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Path + "?" + r.URL.RawQuery
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"re_1","object":"refund","amount":500,"charge":"ch_1","currency":"usd","status":"succeeded",
			"idempotency_key":"chargeonce_a1","metadata":{"chargeonce_attempt_id":"a1","client_idempotency_key":"r1"}}]}`))
	}))
	t.Cleanup(srv.Close)
	refunds, err := New(srv.URL, "k3y", nil).ProviderRefunds(context.Background(), "", "ch_1")
	require.NoError(t, err)
	require.Equal(t, "/provider/v1/refunds?charge=ch_1&merchant=demo", query)
	require.Equal(t, []ProviderRefund{{ID: "re_1", Charge: "ch_1", Amount: 500, Currency: "usd", Status: "succeeded", IdempotencyKey: "chargeonce_a1",
		Metadata: map[string]string{"chargeonce_attempt_id": "a1", "client_idempotency_key": "r1"}}}, refunds)
}
