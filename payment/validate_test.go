package payment

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateKey(t *testing.T) {
	t.Parallel()
	valid := []string{"a", "8e03978e-40d5-43e8-bc93-6894a57f9324", strings.Repeat("k", 255), "!~#$%&'*+-.^_`|"}
	for _, key := range valid {
		require.NoError(t, ValidateKey(key), key)
	}
	invalid := []string{"", " ", "a b", "tab\there", "new\nline", "clé", "\x00", "\x7f", strings.Repeat("k", 256)}
	for _, key := range invalid {
		err := ValidateKey(key)
		require.Error(t, err, "%q", key)
		require.Equal(t, EINVALID, ErrorCode(err))
	}
}

func TestFingerprint_DifferentRequest_DifferentFingerprint(t *testing.T) {
	t.Parallel()
	base := ChargeInput{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "ab", Description: "c"}
	variants := []ChargeInput{
		{Amount: 2000, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "ab", Description: "c"},
		{Amount: 1999, Currency: "EUR", PaymentMethod: "pm_card_visa", OrderID: "ab", Description: "c"},
		{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_mastercard", OrderID: "ab", Description: "c"},
		// Moving characters between fields must not collide.
		{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "a", Description: "bc"},
		{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "", Description: "abc"},
		{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "abc", Description: ""},
	}
	seen := [][]byte{Fingerprint(base)}
	for _, v := range variants {
		fp := Fingerprint(v)
		for _, other := range seen {
			require.False(t, bytes.Equal(fp, other), "%+v collides", v)
		}
		seen = append(seen, fp)
	}
}

func TestChargeInput_Validate(t *testing.T) {
	t.Parallel()
	ok := ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm_card_visa"}
	require.NoError(t, ok.Validate())
	tests := []struct {
		name  string
		edit  func(*ChargeInput)
		field string
	}{
		{"zero amount", func(in *ChargeInput) { in.Amount = 0 }, "input.amount"},
		{"amount over the limit", func(in *ChargeInput) { in.Amount = MaxAmount + 1 }, "input.amount"},
		{"lower-case currency", func(in *ChargeInput) { in.Currency = "usd" }, "input.currency"},
		{"not ISO 4217", func(in *ChargeInput) { in.Currency = "ABC" }, "input.currency"},
		{"four letters", func(in *ChargeInput) { in.Currency = "USDX" }, "input.currency"},
		{"no payment method", func(in *ChargeInput) { in.PaymentMethod = "" }, "input.paymentMethod"},
		{"payment method with a dash", func(in *ChargeInput) { in.PaymentMethod = "pm-card" }, "input.paymentMethod"},
		{"order id too long", func(in *ChargeInput) { in.OrderID = strings.Repeat("é", MaxOrderIDLength+1) }, "input.orderId"},
		{"description not UTF-8", func(in *ChargeInput) { in.Description = "\xff" }, "input.description"},
		{"description with a newline", func(in *ChargeInput) { in.Description = "a\nb" }, "input.description"},
	}
	for _, tt := range tests {
		in := ok
		tt.edit(&in)
		err := in.Validate()
		require.Error(t, err, tt.name)
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, EINVALID, e.Code, tt.name)
		require.Equal(t, tt.field, e.Field, tt.name)
	}
	// Lengths count characters, not bytes.
	multibyte := ok
	multibyte.OrderID = strings.Repeat("é", MaxOrderIDLength)
	require.NoError(t, multibyte.Validate())
}

func TestFingerprint_OfValidInput_IsUnchanged(t *testing.T) {
	t.Parallel()
	// Attempts stored by earlier versions keep matching their retries: the
	// fingerprint of a valid request is the start of the same SHA-256 it
	// always was, which those attempts kept whole.
	tests := []struct {
		in     ChargeInput
		stored string
	}{
		{ChargeInput{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa"},
			"24d6cc6e56d7c65f25a4625aa38c5f01ce357fbf16fe65d07b412e287d209227"},
		{ChargeInput{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "order-1001", Description: "Socks <3 & \"more\" é"},
			"35745a14727b9dfcbccb998e7034026b8c5c732928e23c5ab7efebac4e8a0105"},
	}
	for _, tt := range tests {
		fp := Fingerprint(tt.in)
		require.Equal(t, tt.stored[:2*fingerprintSize], hex.EncodeToString(fp), "%+v", tt.in)
		stored, err := hex.DecodeString(tt.stored)
		require.NoError(t, err)
		require.True(t, sameRequest(stored, fp), "a whole SHA-256 stored before")
		require.True(t, sameRequest(fp, fp))
		stored[len(stored)-1] ^= 1
		require.True(t, sameRequest(stored, fp), "only its start is compared")
		stored[0] ^= 1
		require.False(t, sameRequest(stored, fp))
		require.False(t, sameRequest(fp[:8], fp), "a stored fingerprint shorter than the request's")
	}
}

func TestFingerprint_BytesThatAreNotUTF8_DoNotCollide(t *testing.T) {
	t.Parallel()
	// encoding/json reads each of these as U+FFFD.
	inputs := []ChargeInput{
		{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: "\xfe"},
		{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: "\xff"},
		{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: "\ufffd"},
		{Amount: 1, Currency: "\xc3", PaymentMethod: "\xa9"},
		{Amount: 1, Currency: "\xc3", PaymentMethod: "\xaa"},
	}
	for i, x := range inputs {
		for _, y := range inputs[i+1:] {
			require.NotEqual(t, Fingerprint(x), Fingerprint(y), "%#v and %#v", x, y)
		}
	}
}
