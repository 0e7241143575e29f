package cardsim_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/cardsim"
)

// The lists' filters by status and order, and their pages: what a caller
// reads to count every charge or refund, however many.

// listOf reads one page of the list at path (/v1/charges or /v1/refunds).
func listOf[T any](s *sim, path string, query url.Values) (data []T, hasMore bool) {
	s.t.Helper()
	resp, raw := s.get(path + "?" + query.Encode())
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	l := decode[struct {
		Object  string `json:"object"`
		Data    []T    `json:"data"`
		HasMore *bool  `json:"has_more"`
	}](s.t, raw)
	require.Equal(s.t, "list", l.Object)
	require.NotNil(s.t, l.Data, "data must be an array, never null")
	require.NotNil(s.t, l.HasMore, "has_more is always there")
	return l.Data, *l.HasMore
}

// listError requires that GET path with query is refused with 400 and
// returns the error's code.
func listError(s *sim, path string, query url.Values) string {
	s.t.Helper()
	resp, raw := s.get(path + "?" + query.Encode())
	require.Equal(s.t, http.StatusBadRequest, resp.StatusCode, string(raw))
	e := decode[errorBody](s.t, raw)
	require.Equal(s.t, "invalid_request_error", e.Error.Type)
	require.NotEmpty(s.t, e.Error.Message)
	return e.Error.Code
}

func chargeIDs(cs []charge) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func refundIDs(rs []refund) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// chargeForOrder charges paymentMethod for orderID under a fresh key and
// returns the charge's id, declined or not.
func (s *sim) chargeForOrder(orderID, paymentMethod string) string {
	s.t.Helper()
	body := chargeBody(paymentMethod)
	body["metadata"] = map[string]string{"order_id": orderID}
	resp, raw := s.mustPost(uniqueKey(s.t), body)
	if resp.StatusCode == http.StatusPaymentRequired {
		return decode[errorBody](s.t, raw).Error.Charge
	}
	require.Equal(s.t, http.StatusOK, resp.StatusCode, string(raw))
	return decode[charge](s.t, raw).ID
}

func TestListCharges_OrderIDAndStatus_FilterAsGiven(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	paid := s.chargeForOrder("o-1", "pm_card_visa")
	declined := s.chargeForOrder("o-1", "pm_card_chargeDeclined")
	other := s.chargeForOrder("o-2", "pm_card_visa")

	require.Equal(t, []string{declined, paid}, chargeIDs(s.list(url.Values{"order_id": {"o-1"}})))
	require.Equal(t, []string{paid}, chargeIDs(s.list(url.Values{"order_id": {"o-1"}, "status": {"succeeded"}})),
		"filters combine")
	require.Equal(t, []string{other, paid}, chargeIDs(s.list(url.Values{"status": {"succeeded"}})))
	require.Equal(t, []string{declined}, chargeIDs(s.list(url.Values{"status": {"failed"}})))
	require.Empty(t, s.list(url.Values{"status": {"requires_action"}}))
	require.Empty(t, s.list(url.Values{"order_id": {""}}), "an empty filter matches nothing")
	require.Empty(t, s.list(url.Values{"order_id": {"o-3"}}))
}

func TestListCharges_UnknownStatus_Returns400(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	for _, status := range []string{"", "SUCCEEDED", "pending", "paid"} {
		require.Equal(t, "status_invalid", listError(s, "/v1/charges", url.Values{"status": {status}}), "status %q", status)
	}
}

func TestListCharges_Pages_EachStartsAfterTheLastOfTheOneBefore(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	for range 5 {
		s.chargeForOrder("o-1", "pm_card_visa")
	}
	s.chargeForOrder("o-2", "pm_card_visa")
	all := chargeIDs(s.list(url.Values{"order_id": {"o-1"}}))
	require.Len(t, all, 5)

	var paged []string
	var pages []int
	query := url.Values{"order_id": {"o-1"}, "limit": {"2"}}
	for {
		data, more := listOf[charge](s, "/v1/charges", query)
		paged = append(paged, chargeIDs(data)...)
		pages = append(pages, len(data))
		if !more {
			break
		}
		query.Set("starting_after", data[len(data)-1].ID)
	}
	require.Equal(t, []int{2, 2, 1}, pages)
	require.Equal(t, all, paged, "the pages are the list, in its order, each charge once")

	_, more := listOf[charge](s, "/v1/charges", url.Values{"order_id": {"o-1"}, "limit": {"5"}})
	require.False(t, more, "a page that ends with the list says so")
}

func TestListCharges_StartingAfterUnknownCharge_Returns400(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	s.chargeForOrder("o-1", "pm_card_visa")
	for _, id := range []string{"ch_doesNotExist", ""} {
		require.Equal(t, "resource_missing", listError(s, "/v1/charges", url.Values{"starting_after": {id}}), "id %q", id)
	}
}

func TestListRefunds_StatusAndPages(t *testing.T) {
	t.Parallel()
	s := newSim(t, cardsim.Config{})
	chargeID := s.newCharge("pm_card_visa")
	a := s.refund(chargeID, 100)
	b := s.refund(chargeID, 200)
	c := s.refund(chargeID, 300)
	resp, raw := s.failRefund(b.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))

	require.Equal(t, []string{c.ID, a.ID}, refundIDs(s.listRefunds(url.Values{"status": {"succeeded"}})))
	require.Equal(t, []string{b.ID}, refundIDs(s.listRefunds(url.Values{"charge": {chargeID}, "status": {"failed"}})))
	require.Empty(t, s.listRefunds(url.Values{"status": {"pending"}}))
	for _, status := range []string{"", "canceled", "requires_action"} {
		require.Equal(t, "status_invalid", listError(s, "/v1/refunds", url.Values{"status": {status}}), "status %q", status)
	}

	first, more := listOf[refund](s, "/v1/refunds", url.Values{"charge": {chargeID}, "limit": {"2"}})
	require.True(t, more)
	second, more := listOf[refund](s, "/v1/refunds", url.Values{"charge": {chargeID}, "limit": {"2"}, "starting_after": {first[1].ID}})
	require.False(t, more)
	require.Equal(t, []string{c.ID, b.ID, a.ID}, append(refundIDs(first), refundIDs(second)...))
	require.Equal(t, "resource_missing", listError(s, "/v1/refunds", url.Values{"starting_after": {chargeID}}),
		"a charge's id is no refund to start after")
}
