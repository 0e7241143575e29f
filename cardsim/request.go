package cardsim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of a request.
const (
	maxBodyBytes     = 1 << 20
	maxKeyLen        = 255
	maxAmount        = 99_999_999
	defaultListLimit = 100
	maxListLimit     = 1000
	maxReturnURLLen  = 2048
)

// createRequest is the validated body of POST /v1/charges.
type createRequest struct {
	Amount        int64
	Currency      string
	PaymentMethod string
	Description   *string
	Metadata      map[string]string
	// ReturnURL is where the challenge page sends the shopper back; nil
	// when the request had none.
	ReturnURL *string
	// CaptureMethod is captureManual for a charge that only authorizes;
	// "" (none given) or captureAutomatic takes the money at once.
	CaptureMethod string
}

// idempotencyKey returns the request's Idempotency-Key header: exactly one,
// 1 to 255 characters of valid UTF-8 without control characters (it is
// stored as PostgreSQL text).
func idempotencyKey(r *http.Request) (string, *apiError) {
	values := r.Header.Values("Idempotency-Key")
	if len(values) == 0 {
		e := invalidRequest("idempotency_key_missing", "The Idempotency-Key header is required.")
		return "", &e
	}
	key := values[0]
	n := utf8.RuneCountInString(key)
	if len(values) > 1 || n < 1 || n > maxKeyLen || !utf8.ValidString(key) || strings.ContainsFunc(key, unicode.IsControl) {
		e := invalidRequest("idempotency_key_invalid",
			fmt.Sprintf("The Idempotency-Key header must be given once, with 1 to %d printable characters.", maxKeyLen))
		return "", &e
	}
	return key, nil
}

// decodeCreateRequest reads and validates the body of POST /v1/charges.
func decodeCreateRequest(w http.ResponseWriter, r *http.Request) (createRequest, *apiError) {
	var body struct {
		Amount        int64              `json:"amount"`
		Currency      string             `json:"currency"`
		PaymentMethod string             `json:"payment_method"`
		Description   *string            `json:"description"`
		Metadata      map[string]*string `json:"metadata"` // pointers, to refuse null values
		ReturnURL     *string            `json:"return_url"`
		CaptureMethod *string            `json:"capture_method"`
	}
	fail := func(code, message string) (createRequest, *apiError) {
		e := invalidRequest(code, message)
		return createRequest{}, &e
	}
	fieldError := func(field string) (apiError, bool) {
		switch field {
		case "amount":
			return invalidRequest("amount_invalid", amountRule), true
		case "currency":
			return invalidRequest("currency_invalid", currencyRule), true
		case "payment_method":
			return invalidRequest("payment_method_invalid", "payment_method must be a string."), true
		case "description":
			return invalidRequest("description_invalid", "description must be a string or null."), true
		case "metadata":
			return invalidRequest("metadata_invalid", metadataRule), true
		case "return_url":
			return invalidRequest("return_url_invalid", returnURLRule), true
		case "capture_method":
			return invalidRequest("capture_method_invalid", captureMethodRule), true
		}
		return apiError{}, false
	}
	if e := decodeObject(w, r, &body, fieldError); e != nil {
		return createRequest{}, e
	}

	if body.Amount < 1 || body.Amount > maxAmount {
		return fail("amount_invalid", amountRule)
	}
	if !validCurrency(body.Currency) {
		return fail("currency_invalid", currencyRule)
	}
	if body.PaymentMethod == "" {
		return fail("payment_method_missing", "payment_method is required.")
	}
	// PostgreSQL text and jsonb cannot hold NUL: refuse it here rather than fail later.
	if body.Description != nil && strings.ContainsRune(*body.Description, 0) {
		return fail("description_invalid", "description must not contain NUL characters.")
	}
	metadata, ok := decodeMetadata(body.Metadata)
	if !ok {
		return fail("metadata_invalid", metadataRule)
	}
	if body.ReturnURL != nil && !validReturnURL(*body.ReturnURL) {
		return fail("return_url_invalid", returnURLRule)
	}
	var captureMethod string
	if body.CaptureMethod != nil {
		if *body.CaptureMethod != captureAutomatic && *body.CaptureMethod != captureManual {
			return fail("capture_method_invalid", captureMethodRule)
		}
		captureMethod = *body.CaptureMethod
	}
	return createRequest{
		Amount: body.Amount,
		// One spelling per currency, so that "usd" and "USD" are one request.
		Currency:      strings.ToUpper(body.Currency),
		PaymentMethod: body.PaymentMethod,
		Description:   body.Description,
		Metadata:      metadata,
		ReturnURL:     body.ReturnURL,
		CaptureMethod: captureMethod,
	}, nil
}

// validCurrency reports whether s is three letters, as an ISO 4217 code.
func validCurrency(s string) bool {
	return len(s) == 3 && !strings.ContainsFunc(s, func(c rune) bool {
		return (c < 'A' || c > 'Z') && (c < 'a' || c > 'z')
	})
}

var (
	currencyRule      = "currency must be a three-letter ISO 4217 code."
	amountRule        = fmt.Sprintf("amount must be an integer from 1 to %d.", maxAmount)
	metadataRule      = "metadata must be an object of string values."
	captureMethodRule = "capture_method must be " + captureAutomatic + " or " + captureManual + "."
)

// decodeObject reads r's body, which must hold a single JSON object, into
// v. A field of the wrong type is refused as fieldError says, or else as a
// body that is not the object expected.
func decodeObject(w http.ResponseWriter, r *http.Request, v any, fieldError func(field string) (apiError, bool)) *apiError {
	fail := func(message string) *apiError {
		e := invalidRequest("body_invalid", message)
		return &e
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var sizeErr *http.MaxBytesError
		switch {
		case errors.As(err, &sizeErr):
			return fail(fmt.Sprintf("The request body is larger than %d bytes.", maxBodyBytes))
		case errors.As(err, &typeErr):
			field, _, _ := strings.Cut(typeErr.Field, ".")
			if e, ok := fieldError(field); ok {
				return &e
			}
			return fail("The request body must be a JSON object.")
		case errors.Is(err, io.EOF):
			return fail("The request body is empty.")
		default:
			return fail("The request body is not valid JSON: " + err.Error())
		}
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return fail("The request body must hold a single JSON object.")
	}
	return nil
}

// decodeMetadata checks a request's metadata, decoded with pointer values
// so that a null is told apart: string values only, and no NUL anywhere
// (PostgreSQL's jsonb cannot hold it).
func decodeMetadata(m map[string]*string) (map[string]string, bool) {
	metadata := make(map[string]string, len(m))
	for k, v := range m {
		if v == nil || strings.ContainsRune(k, 0) || strings.ContainsRune(*v, 0) {
			return nil, false
		}
		metadata[k] = *v
	}
	return metadata, true
}

var returnURLRule = fmt.Sprintf("return_url must be an absolute http or https URL of at most %d characters, "+
	"without credentials or whitespace.", maxReturnURLLen)

// validReturnURL reports whether s may be a charge's return_url: the challenge
// page redirects the shopper's browser to it verbatim, so it must be a
// complete web address, and one that carries no password into a Location
// header. It is the rule chargeonce applies to a checkout's returnUrl.
func validReturnURL(s string) bool {
	if len(s) > maxReturnURLLen || strings.ContainsFunc(s, unicode.IsSpace) {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}

// cancellationReasons are the reasons a caller may give for cancelling a
// waiting charge: Stripe's, for a PaymentIntent.
var cancellationReasons = []string{"abandoned", "duplicate", "fraudulent", "requested_by_customer"}

// decodeCancelRequest reads the body of POST /v1/charges/{id}/cancel, a JSON
// object or a form (as Stripe takes it), with an optional
// cancellation_reason; "" is none.
func decodeCancelRequest(w http.ResponseWriter, r *http.Request) (reason string, _ *apiError) {
	fail := func(code, message string) (string, *apiError) {
		e := invalidRequest(code, message)
		return "", &e
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mediaType == "application/json" {
		var body struct {
			CancellationReason *string `json:"cancellation_reason"`
		}
		dec := json.NewDecoder(r.Body)
		err := dec.Decode(&body)
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			// No body: no reason.
		case errors.As(err, &typeErr) && typeErr.Field == "cancellation_reason":
			return fail("cancellation_reason_invalid", cancellationReasonRule)
		case err != nil:
			return fail("body_invalid", "The request body must be a JSON object.")
		case !errors.Is(dec.Decode(&struct{}{}), io.EOF):
			return fail("body_invalid", "The request body must hold a single JSON object.")
		case body.CancellationReason != nil:
			reason = *body.CancellationReason
		}
	} else {
		// Any other body is read as a form, as ParseForm does: only a
		// urlencoded one holds fields.
		if err := r.ParseForm(); err != nil {
			return fail("body_invalid", "The request body is not a valid form.")
		}
		reason = r.PostForm.Get("cancellation_reason")
	}
	if reason != "" && !slices.Contains(cancellationReasons, reason) {
		return fail("cancellation_reason_invalid", cancellationReasonRule)
	}
	return reason, nil
}

var cancellationReasonRule = "cancellation_reason must be one of " + strings.Join(cancellationReasons, ", ") + "."

// listFilter is the validated query of GET /v1/charges. A nil filter was not
// given.
type listFilter struct {
	IdempotencyKey       *string
	ClientIdempotencyKey *string
	Merchant             *string
	// AttemptID: chargeonce's attempt, in the metadata, whatever the key.
	AttemptID *string
	OrderID   *string // the metadata's order_id
	Status    *string
	// CaptureMethod: automatic or manual; AuthorizationStatus: open,
	// captured, voided or expired.
	CaptureMethod       *string
	AuthorizationStatus *string
	page
}

// page is where a list's answer starts and how long it is at most. A
// caller reads a long list page by page, each starting after the last item
// of the one before, as with Stripe's lists.
type page struct {
	StartingAfter *string // an item's id
	Limit         int32
}

// chargeStatuses are the statuses a list of charges may be filtered by.
var chargeStatuses = []string{statusSucceeded, statusFailed, statusRequiresAction, statusCanceled}

// parseListQuery reads and validates the query of GET /v1/charges.
func parseListQuery(r *http.Request) (listFilter, *apiError) {
	query := r.URL.Query()
	p, e := listPage(query)
	if e != nil {
		return listFilter{}, e
	}
	status, e := statusFilter(query, chargeStatuses)
	if e != nil {
		return listFilter{}, e
	}
	captureMethod, e := oneOf(query, "capture_method", []string{captureAutomatic, captureManual})
	if e != nil {
		return listFilter{}, e
	}
	authorizationStatus, e := oneOf(query, "authorization_status", authorizationStatuses)
	if e != nil {
		return listFilter{}, e
	}
	return listFilter{
		IdempotencyKey:       queryFilter(query, "idempotency_key"),
		ClientIdempotencyKey: queryFilter(query, "client_idempotency_key"),
		Merchant:             queryFilter(query, "merchant"),
		AttemptID:            queryFilter(query, "attempt_id"),
		OrderID:              queryFilter(query, "order_id"),
		Status:               status,
		CaptureMethod:        captureMethod,
		AuthorizationStatus:  authorizationStatus,
		page:                 p,
	}, nil
}

// listPage is the page of a list's query: from the newest item unless
// starting_after is given, defaultListLimit long unless limit is.
func listPage(query url.Values) (page, *apiError) {
	limit, e := listLimit(query)
	if e != nil {
		return page{}, e
	}
	return page{StartingAfter: queryFilter(query, "starting_after"), Limit: limit}, nil
}

// statusFilter is the status filter of a list's query, which must be one of
// statuses: a status that no item can have is a caller's mistake, not an
// empty list.
func statusFilter(query url.Values, statuses []string) (*string, *apiError) {
	return oneOf(query, "status", statuses)
}

// oneOf is the filter name of a list's query, which must be one of values,
// as statusFilter.
func oneOf(query url.Values, name string, values []string) (*string, *apiError) {
	v := queryFilter(query, name)
	if v != nil && !slices.Contains(values, *v) {
		e := invalidRequest(name+"_invalid", name+" must be one of "+strings.Join(values, ", ")+".")
		return nil, &e
	}
	return v, nil
}

// authorizationStatuses are the statuses an authorization may have.
var authorizationStatuses = []string{authorizationOpen, authorizationCaptured, authorizationVoided, authorizationExpired}

// listLimit is the limit of a list's query: defaultListLimit unless given.
func listLimit(query url.Values) (int32, *apiError) {
	if !query.Has("limit") {
		return defaultListLimit, nil
	}
	limit, err := strconv.Atoi(query.Get("limit"))
	if err != nil || limit < 1 || limit > maxListLimit {
		e := invalidRequest("limit_invalid", fmt.Sprintf("limit must be an integer from 1 to %d.", maxListLimit))
		return 0, &e
	}
	return int32(limit), nil
}

// queryFilter is the filter name of a list's query; nil when not given. A
// filter that is given applies as given, even empty: an empty key matches
// nothing rather than everything, so a caller's bug cannot make another
// charge look like its own.
func queryFilter(query url.Values, name string) *string {
	if !query.Has(name) {
		return nil
	}
	v := query.Get(name)
	return &v
}

// requestHash is the SHA-256 of a canonical encoding of the charge's
// parameters: a version tag, then each field length-prefixed (so no two
// requests encode alike), metadata sorted by key, and null description told
// apart from an empty one. The return_url and the capture method, which came
// later, are appended only when given (the method only when manual): a
// request without them encodes exactly as before, so the charges stored
// before they existed still replay their keys.
func requestHash(req createRequest) []byte {
	var c canonical
	c.putString("cardsim.charge.v1")
	c.putInt(req.Amount)
	c.putString(req.Currency)
	c.putString(req.PaymentMethod)
	c.putOptional(req.Description)
	c.putMetadata(req.Metadata)
	if req.ReturnURL != nil {
		c.putString("return_url")
		c.putString(*req.ReturnURL)
	}
	if req.CaptureMethod == captureManual {
		c.putString("capture_method")
		c.putString(captureManual)
	}
	sum := sha256.Sum256(c)
	return sum[:]
}

// canonical is the encoding that request hashes are taken of.
type canonical []byte

func (c *canonical) putInt(n int64) { *c = binary.BigEndian.AppendUint64(*c, uint64(n)) }

// putString puts s length-prefixed, so that no two lists of strings encode
// alike.
func (c *canonical) putString(s string) {
	c.putInt(int64(len(s)))
	*c = append(*c, s...)
}

func (c *canonical) putBool(b bool) {
	if b {
		*c = append(*c, 1)
		return
	}
	*c = append(*c, 0)
}

// putOptional tells a nil s apart from an empty one.
func (c *canonical) putOptional(s *string) {
	if s == nil {
		*c = append(*c, 0)
		return
	}
	*c = append(*c, 1)
	c.putString(*s)
}

// putMetadata puts m sorted by key.
func (c *canonical) putMetadata(m map[string]string) {
	keys := slices.Sorted(maps.Keys(m))
	c.putInt(int64(len(keys)))
	for _, k := range keys {
		c.putString(k)
		c.putString(m[k])
	}
}
