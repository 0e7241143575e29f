package payment

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets of the validation seam: whatever a client sends, the
// answer is nil or an EINVALID *Error that names the offending field, and
// never a panic. `make fuzz` runs each for a while; `go test` runs the seeds.

func FuzzValidateKey(f *testing.F) {
	for _, seed := range []string{
		"", "a", "8e03978e-40d5-43e8-bc93-6894a57f9324", "!~#$%&'*+-.^_`|",
		strings.Repeat("k", MaxKeyLength), strings.Repeat("k", MaxKeyLength+1),
		" ", "a b", "tab\there", "\x00", "a\x00", "\x7f", "\x20", "\x21", "\x7e",
		"clé", "\u00a0", "€", "\xff", "a\xc3", "\xed\xa0\x80",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidateKey(key)
		if want := isValidKey(key); want != (err == nil) {
			t.Fatalf("ValidateKey(%q) = %v; want valid = %v", key, err, want)
		}
		if err != nil {
			requireInvalid(t, err, "idempotencyKey")
		}
	})
}

// isValidKey is docs/api.md's rule, written apart from ValidateKey: 1 to 255
// bytes, each printable ASCII other than space (0x21 to 0x7e).
func isValidKey(key string) bool {
	if len(key) < 1 || len(key) > 255 {
		return false
	}
	for _, b := range []byte(key) {
		if b < 0x21 || b > 0x7e {
			return false
		}
	}
	return true
}

var inputFields = []string{"input.amount", "input.currency", "input.paymentMethod", "input.orderId", "input.description"}

func FuzzChargeInputValidate(f *testing.F) {
	for _, s := range []struct {
		Amount                                        int64
		Currency, PaymentMethod, OrderID, Description string
	}{
		{1999, "USD", "pm_card_visa", "order-1", "socks"},
		{1, "JPY", "pm_card_visa", "", ""},
		{MaxAmount, "KWD", strings.Repeat("p", 255), strings.Repeat("é", MaxOrderIDLength), strings.Repeat("€", MaxDescriptionLength)},
		{0, "USD", "pm_card_visa", "", ""},
		{-1, "USD", "pm_card_visa", "", ""},
		{MaxAmount + 1, "USD", "pm_card_visa", "", ""},
		{-9223372036854775808, "XXX", "", "", ""},
		{100, "XXX", "pm_card_visa", "", ""},
		{100, "XTS", "pm_card_visa", "", ""},
		{100, "USN", "pm_card_visa", "", ""},
		{100, "usd", "pm_card_visa", "", ""},
		{100, "USDX", "pm_card_visa", "", ""},
		{100, "", "pm_card_visa", "", ""},
		{100, "USD", "", "", ""},
		{100, "USD", "pm-card", "", ""},
		{100, "USD", strings.Repeat("p", 256), "", ""},
		{100, "USD", "pm_card_visa", strings.Repeat("é", MaxOrderIDLength+1), ""},
		{100, "USD", "pm_card_visa", "a\nb", ""},
		{100, "USD", "pm_card_visa", "\x7f", ""},
		{100, "USD", "pm_card_visa", "", "\xff"},
		{100, "USD", "pm_card_visa", "", "a\x00b"},
		{100, "USD", "pm_card_visa", "", strings.Repeat("d", MaxDescriptionLength+1)},
	} {
		f.Add(s.Amount, s.Currency, s.PaymentMethod, s.OrderID, s.Description)
	}
	f.Fuzz(func(t *testing.T, amount int64, currency, paymentMethod, orderID, description string) {
		in := ChargeInput{Amount: amount, Currency: currency, PaymentMethod: paymentMethod, OrderID: orderID, Description: description}
		err := in.Validate()
		field := ""
		if err != nil {
			field = requireInvalid(t, err, inputFields...)
		}
		if amount < 1 || amount > 99_999_999 {
			requireField(t, in, err, field, "input.amount")
			return
		}
		if _, ok := MinorUnits(currency); !ok || currency == "XXX" || currency == "XTS" {
			requireField(t, in, err, field, "input.currency")
			return
		}
		if !isPaymentToken(paymentMethod) {
			requireField(t, in, err, field, "input.paymentMethod")
			return
		}
		if !isText(orderID, 100) {
			requireField(t, in, err, field, "input.orderId")
			return
		}
		if !isText(description, 500) {
			requireField(t, in, err, field, "input.description")
			return
		}
		if err != nil {
			t.Fatalf("%+v: valid input refused: %v", in, err)
		}
	})
}

// isPaymentToken: 1 to 255 ASCII letters, digits and underscores.
func isPaymentToken(s string) bool {
	if len(s) < 1 || len(s) > 255 {
		return false
	}
	for _, b := range []byte(s) {
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_') {
			return false
		}
	}
	return true
}

// isText: valid UTF-8, at most max characters, no C0 or C1 control, DEL,
// or line or paragraph separator.
func isText(s string, limit int) bool {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > limit {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029
	})
}

func requireField(t *testing.T, in ChargeInput, err error, got, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%+v: accepted; want an error about %s", in, want)
	}
	if got != want {
		t.Fatalf("%+v: error names %s; want %s (%v)", in, got, want, err)
	}
}

// requireInvalid checks that err is an EINVALID *Error with a message and
// one of fields, and returns the field.
func requireInvalid(t *testing.T, err error, fields ...string) string {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *payment.Error", err, err)
	}
	if e.Code != EINVALID || e.Message == "" || !slices.Contains(fields, e.Field) {
		t.Fatalf("error %+v: want code %q, a message and a field among %q", e, EINVALID, fields)
	}
	return e.Field
}

func FuzzFingerprint(f *testing.F) {
	type pair struct{ x, y ChargeInput }
	base := ChargeInput{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "ab", Description: "c"}
	for _, s := range []pair{
		{base, base},
		{base, ChargeInput{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "a", Description: "bc"}},
		{base, ChargeInput{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "", Description: "abc"}},
		{base, ChargeInput{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "abc", Description: ""}},
		{base, ChargeInput{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visaab", OrderID: "", Description: "c"}},
		{ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "", Description: ""}, ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm_card_visa", OrderID: "", Description: ""}},
		{ChargeInput{Amount: 12, Currency: "USD", PaymentMethod: "pm", OrderID: "", Description: ""}, ChargeInput{Amount: 1, Currency: "2USD", PaymentMethod: "pm", OrderID: "", Description: ""}},
		{ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: `","orderId":"x`, Description: ""}, ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: "", Description: `","orderId":"x`}},
		{ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: "é", Description: ""}, ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: "e\u0301", Description: ""}},
		{ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: "<>&", Description: ""}, ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: `\u003c\u003e\u0026`, Description: ""}},
		// Bytes that are not UTF-8 are not valid input, but they are input.
		{ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: "a\xffb", Description: ""}, ChargeInput{Amount: 1, Currency: "USD", PaymentMethod: "pm", OrderID: "a\xffb", Description: ""}},
	} {
		f.Add(s.x.Amount, s.x.Currency, s.x.PaymentMethod, s.x.OrderID, s.x.Description,
			s.y.Amount, s.y.Currency, s.y.PaymentMethod, s.y.OrderID, s.y.Description)
	}
	f.Fuzz(func(t *testing.T, a1 int64, c1, p1, o1, d1 string, a2 int64, c2, p2, o2, d2 string) {
		x := ChargeInput{Amount: a1, Currency: c1, PaymentMethod: p1, OrderID: o1, Description: d1}
		y := ChargeInput{Amount: a2, Currency: c2, PaymentMethod: p2, OrderID: o2, Description: d2}
		fx, fy := Fingerprint(x), Fingerprint(y)
		if len(fx) != fingerprintSize || len(fy) != fingerprintSize {
			t.Fatalf("fingerprints of %d and %d bytes; want %d of SHA-256's", len(fx), len(fy), fingerprintSize)
		}
		if !bytes.Equal(fx, Fingerprint(x)) {
			t.Fatalf("%+v: two calls, two fingerprints", x)
		}
		if same := bytes.Equal(fx, fy); same != (x == y) {
			t.Fatalf("equal fingerprints = %v, equal inputs = %v:\n x = %#v\n y = %#v", same, x == y, x, y)
		}
	})
}
