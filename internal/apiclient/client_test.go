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

func TestListProviderCharges_SendsOnlyTheGivenFiltersAndReadsEveryPage(t *testing.T) {
	t.Parallel()
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		switch r.URL.Query().Get("starting_after") {
		case "":
			_, _ = w.Write([]byte(`{"object":"list","has_more":true,"data":[{"id":"ch_3","status":"succeeded"},{"id":"ch_2","status":"succeeded"}]}`))
		case "ch_2":
			_, _ = w.Write([]byte(`{"object":"list","has_more":false,"data":[{"id":"ch_1","status":"succeeded","return_url":"https://shop.example/back"}]}`))
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	charges, err := New(srv.URL, "", nil).ListProviderCharges(context.Background(), ProviderChargeFilter{OrderID: "o-1", Status: "succeeded"})
	require.NoError(t, err)
	require.Equal(t, []string{
		"/provider/v1/charges?order_id=o-1&status=succeeded",
		"/provider/v1/charges?order_id=o-1&starting_after=ch_2&status=succeeded",
	}, asked, "empty fields are not sent: the provider would match nothing")
	require.Equal(t, []ProviderCharge{{ID: "ch_3", Status: "succeeded"}, {ID: "ch_2", Status: "succeeded"},
		{ID: "ch_1", Status: "succeeded", ReturnURL: "https://shop.example/back"}}, charges)
}

func TestListProviderRefunds_ZeroFilter_AsksForEveryRefund(t *testing.T) {
	t.Parallel()
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.Path + "?" + r.URL.RawQuery
		_, _ = w.Write([]byte(`{"object":"list","has_more":false,"data":[]}`))
	}))
	t.Cleanup(srv.Close)
	refunds, err := New(srv.URL, "", nil).ListProviderRefunds(context.Background(), ProviderRefundFilter{})
	require.NoError(t, err)
	require.Equal(t, "/provider/v1/refunds?", asked)
	require.NotNil(t, refunds)
	require.Empty(t, refunds)
}

func TestListProviderCharges_EmptyPageWithMore_IsAnError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"object":"list","has_more":true,"data":[]}`))
	}))
	t.Cleanup(srv.Close)
	_, err := New(srv.URL, "", nil).ListProviderCharges(context.Background(), ProviderChargeFilter{})
	require.ErrorContains(t, err, "more follow", "no page to start after: asking again would loop")
}

func TestProviderChargeByID_AsksForTheChargeAndFailsOnARefusal(t *testing.T) {
	t.Parallel()
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.EscapedPath()
		if r.URL.Path != "/provider/v1/charges/ch_1" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"resource_missing"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"ch_1","status":"requires_action","return_url":"https://shop.example/back"}`))
	}))
	t.Cleanup(srv.Close)
	c := New(srv.URL, "", nil)
	charge, err := c.ProviderChargeByID(context.Background(), "ch_1")
	require.NoError(t, err)
	require.Equal(t, &ProviderCharge{ID: "ch_1", Status: "requires_action", ReturnURL: "https://shop.example/back"}, charge)

	_, err = c.ProviderChargeByID(context.Background(), "ch_1/../x")
	require.Equal(t, "/provider/v1/charges/ch_1%2F..%2Fx", asked, "the id is one path segment")
	require.ErrorContains(t, err, "404")
	require.ErrorContains(t, err, "resource_missing")
}
