package cardsim

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRequestHash_WithoutReturnURL_IsTheHashOfBefore pins the hash of a
// request without return_url to the value the simulator gave it before
// return_url existed, so that the charges stored then replay their keys.
func TestRequestHash_WithoutReturnURL_IsTheHashOfBefore(t *testing.T) {
	t.Parallel()
	description := "Order 42"
	req := createRequest{
		Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", Description: &description,
		Metadata: map[string]string{"client_idempotency_key": "client-1", "merchant": "demo"},
	}
	require.Equal(t, "d96a86f841751e7f2b73506954b619af2a71b844dbf0156026ceea974f2e732f", hex.EncodeToString(requestHash(req)))
	require.Equal(t, "c7dfb978967de56b807b5c2ff4aa1bcde39cb25583cf1175005c0347a6c5426a", hex.EncodeToString(requestHash(
		createRequest{Amount: 500, Currency: "EUR", PaymentMethod: "pm_card_visa", Metadata: map[string]string{}})))

	withReturnURL := req
	returnURL := "https://shop.example/done"
	withReturnURL.ReturnURL = &returnURL
	require.NotEqual(t, requestHash(req), requestHash(withReturnURL))
	empty := ""
	withReturnURL.ReturnURL = &empty
	require.NotEqual(t, requestHash(req), requestHash(withReturnURL), "a return_url given is told apart from none")
}

func TestFormatAmount_UsesTheCurrencysMinorUnit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{1999, "USD", "19.99 USD"},
		{5, "EUR", "0.05 EUR"},
		{100, "GBP", "1.00 GBP"},
		{500, "JPY", "500 JPY"},
		{1234, "KWD", "1.234 KWD"},
		{7, "BHD", "0.007 BHD"},
		{99_999_999, "USD", "999999.99 USD"},
		{250, "ZZZ", "2.50 ZZZ"},
	} {
		require.Equal(t, tt.want, formatAmount(tt.amount, tt.currency))
	}
}
