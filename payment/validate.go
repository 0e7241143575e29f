package payment

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Limits of a charge request, part of the API contract.
const (
	MaxKeyLength         = 255
	MinAmount            = 1
	MaxAmount            = 99_999_999
	MaxOrderIDLength     = 100
	MaxDescriptionLength = 500
	maxPaymentMethodLen  = 255
)

var (
	currencyPattern      = regexp.MustCompile(`^[A-Z]{3}$`)
	paymentMethodPattern = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// ValidateKey checks an idempotency key: 1 to 255 printable ASCII characters
// without spaces.
func ValidateKey(key string) error {
	if key == "" {
		return Invalid("idempotencyKey", "idempotency key is empty: send one key per checkout attempt, e.g. a UUID")
	}
	if len(key) > MaxKeyLength {
		return Invalid("idempotencyKey", "idempotency key is %d characters long; at most %d are allowed", len(key), MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return Invalid("idempotencyKey", "idempotency key may hold only printable ASCII characters without spaces; found byte 0x%02x at position %d", c, i)
		}
	}
	return nil
}

// ReservedKeyPrefix starts the idempotency keys of chargeonce's own
// operations (the refunds of late and duplicate charges): a caller's key
// must not, so that no caller can take, or replay, one of them.
const ReservedKeyPrefix = "chargeonce_"

// validateCallerKey is ValidateKey for a key a caller sends to claim an
// attempt or a session: one beginning with ReservedKeyPrefix is refused.
func validateCallerKey(key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if strings.HasPrefix(key, ReservedKeyPrefix) {
		return Invalid("idempotencyKey", "idempotency keys beginning with %s are reserved for chargeonce's own operations; use another key, e.g. a UUID", ReservedKeyPrefix)
	}
	return nil
}

// Validate checks a charge request against the API's limits.
func (in ChargeInput) Validate() error {
	if err := validateMoney(in.Amount, in.Currency); err != nil {
		return err
	}
	if in.PaymentMethod == "" {
		return Invalid("input.paymentMethod", "paymentMethod is empty: pass the provider's token for the card, e.g. pm_card_visa")
	}
	if len(in.PaymentMethod) > maxPaymentMethodLen || !paymentMethodPattern.MatchString(in.PaymentMethod) {
		return Invalid("input.paymentMethod", "paymentMethod must be a provider token of at most %d letters, digits and underscores, e.g. pm_card_visa", maxPaymentMethodLen)
	}
	if err := checkText("input.orderId", in.OrderID, MaxOrderIDLength); err != nil {
		return err
	}
	if err := checkText("input.description", in.Description, MaxDescriptionLength); err != nil {
		return err
	}
	if err := validateCaptureMethod("input.captureMethod", in.CaptureMethod); err != nil {
		return err
	}
	return ValidateReturnURL("input.returnUrl", in.ReturnURL)
}

// validateCaptureMethod checks a capture method: empty (automatic),
// automatic or manual.
func validateCaptureMethod(field string, m CaptureMethod) error {
	if m != "" && m != CaptureAutomatic && m != CaptureManual {
		return Invalid(field, "captureMethod must be AUTOMATIC or MANUAL")
	}
	return nil
}

// ValidateReturnURL checks a returnUrl: empty (none), or an absolute https
// URL of at most MaxReturnURLLength characters without credentials or a
// fragment; plain http only on a loopback host (development), since the
// provider sends the shopper's browser there, with the attempt's key in the
// query.
func ValidateReturnURL(field, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if len(raw) > MaxReturnURLLength || err != nil || !u.IsAbs() || u.Host == "" || u.User != nil || u.Fragment != "" ||
		strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) ||
		(u.Scheme != "https" && u.Scheme != "http") {
		return Invalid(field, "returnUrl must be an absolute https URL of at most %d characters, without credentials or a fragment", MaxReturnURLLength)
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return Invalid(field, "returnUrl must use https; plain http is allowed only on a loopback host (localhost, 127.0.0.1, [::1]) in development")
	}
	return nil
}

// ValidateReturnURL checks a returnUrl as the package's ValidateReturnURL
// does, and in production (Config.Production) refuses plain http even on
// loopback: the shopper's browser is sent there with the attempt's key, and
// a production checkout page is served over https, never from the machine
// that serves the API.
func (s *Service) ValidateReturnURL(field, raw string) error {
	if err := ValidateReturnURL(field, raw); err != nil {
		return err
	}
	return s.httpsInProduction(field, raw)
}

// httpsInProduction refuses, in production, a plain-http returnUrl; it
// leaves every other form to ValidateReturnURL.
func (s *Service) httpsInProduction(field, raw string) error {
	if !s.cfg.Production || raw == "" {
		return nil
	}
	if u, err := url.Parse(raw); err != nil || u.Scheme != "http" {
		return nil
	}
	return Invalid(field, "returnUrl must use https when APP_ENV=production; plain http is allowed only on a loopback host in development")
}

// loopback reports whether host names this machine.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validateMoney checks an amount and its currency, of a charge or a session.
func validateMoney(amount int64, currency string) error {
	if amount < MinAmount || amount > MaxAmount {
		return Invalid("input.amount", "amount must be between %d and %d minor units of the currency; got %d", MinAmount, MaxAmount, amount)
	}
	if !currencyPattern.MatchString(currency) {
		return Invalid("input.currency", "currency must be an ISO 4217 code of three upper-case letters, e.g. USD; got %q", currency)
	}
	if _, ok := MinorUnits(currency); !ok {
		return Invalid("input.currency", "currency %q is not an active ISO 4217 currency that can be charged (test, fund and precious-metal codes such as XTS, XXX, USN or XAU are not)", currency)
	}
	return nil
}

func checkText(field, s string, limit int) error {
	if !utf8.ValidString(s) {
		return Invalid(field, "%s is not valid UTF-8", field)
	}
	if n := utf8.RuneCountInString(s); n > limit {
		return Invalid(field, "%s is %d characters long; at most %d are allowed", field, n, limit)
	}
	for _, r := range s {
		// C0 and C1 controls, and the line and paragraph separators: nothing
		// that could break a line of a log or a provider's dashboard.
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return Invalid(field, "%s must not contain control characters", field)
		}
	}
	return nil
}

// Fingerprint identifies a request by its meaning, not its encoding: the
// SHA-256 of a fixed-order encoding of the input, where an absent optional
// field and an empty one are the same (its first 128 bits: fingerprintOf).
// The same key with another fingerprint is refused. Two different inputs
// never share a fingerprint. A charge on a checkout session adds the
// session's id; one without keeps the encoding it always had, so stored
// fingerprints still match.
func Fingerprint(in ChargeInput) []byte {
	session := ""
	if in.CheckoutSessionID != uuid.Nil {
		session = in.CheckoutSessionID.String()
	}
	var canonical any = struct {
		Version         int    `json:"v"`
		Amount          int64  `json:"amount"`
		Currency        string `json:"currency"`
		PaymentMethod   string `json:"paymentMethod"`
		OrderID         string `json:"orderId"`
		Description     string `json:"description"`
		CheckoutSession string `json:"checkoutSession,omitempty"`
		ReturnURL       string `json:"returnUrl,omitempty"`
		CaptureMethod   string `json:"captureMethod,omitempty"`
	}{1, in.Amount, in.Currency, in.PaymentMethod, in.OrderID, in.Description, session, in.ReturnURL, manual(in.CaptureMethod)}
	if !utf8.ValidString(in.Currency) || !utf8.ValidString(in.PaymentMethod) ||
		!utf8.ValidString(in.OrderID) || !utf8.ValidString(in.Description) {
		// encoding/json writes every byte that is not UTF-8 as U+FFFD, which
		// would give "\xfe" and "\xff" one fingerprint: encode such input's
		// bytes instead (base64). Valid input, the only kind Validate lets
		// through, keeps version 1, so stored fingerprints still match.
		canonical = struct {
			Version         int    `json:"v"`
			Amount          int64  `json:"amount"`
			Currency        []byte `json:"currency"`
			PaymentMethod   []byte `json:"paymentMethod"`
			OrderID         []byte `json:"orderId"`
			Description     []byte `json:"description"`
			CheckoutSession string `json:"checkoutSession,omitempty"`
			ReturnURL       string `json:"returnUrl,omitempty"`
			CaptureMethod   string `json:"captureMethod,omitempty"`
		}{2, in.Amount, []byte(in.Currency), []byte(in.PaymentMethod), []byte(in.OrderID), []byte(in.Description), session, in.ReturnURL,
			manual(in.CaptureMethod)}
	}
	b, err := json.Marshal(canonical)
	if err != nil {
		panic(err) // a struct of strings, bytes and ints always encodes
	}
	return fingerprintOf(b)
}

// fingerprintSize is how much of a request's SHA-256 its attempt keeps: 128
// bits, half the row's bytes for it, and still no two requests of one key
// alike by chance. Attempts stored before kept all 256 (sameRequest).
const fingerprintSize = 16

// fingerprintOf is the fingerprint of a request's canonical encoding.
func fingerprintOf(canonical []byte) []byte {
	sum := sha256.Sum256(canonical)
	return sum[:fingerprintSize:fingerprintSize]
}

// sameRequest is whether an attempt stored with the fingerprint stored was
// asked by the request whose fingerprint is asked: the same, or the start
// of a whole SHA-256 that an attempt stored before fingerprintSize kept.
func sameRequest(stored, asked []byte) bool {
	return len(asked) == fingerprintSize && len(stored) >= len(asked) && bytes.Equal(stored[:len(asked)], asked)
}

// manual is "manual" for CaptureManual, and empty for an automatic capture
// however it was said, so that an automatic charge's fingerprint is what
// it was before capture methods existed.
func manual(m CaptureMethod) string {
	if m == CaptureManual {
		return string(CaptureManual)
	}
	return ""
}
