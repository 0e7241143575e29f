// Package cardsim is the simulated card provider that chargeonce charges in
// development and tests: a real HTTP API with its own idempotency keys, whose
// behaviour is chosen by the payment method token (success, declines, a slow
// charge, provider errors, a lost response). It keeps its state in its own
// PostgreSQL schema, cardsim, and chargeonce reaches it only over HTTP, so that
// chargeonce can neither read the provider's tables nor share its transactions:
// timeouts, dropped connections and retries between the two are as real as
// with a remote provider, and its charges are the ground truth that tests and
// the demo count.
package cardsim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/sqlc"
)

// Config tunes the simulator. The zero value is ready to use.
type Config struct {
	SlowDelay time.Duration // how long pm_card_slow takes; 3s when zero
	Logger    *slog.Logger  // may be nil: nothing is logged
}

const (
	defaultSlowDelay = 3 * time.Second
	// storeTimeout bounds the database work of one charge, which runs detached
	// from the client's connection (see createCharge).
	storeTimeout     = 15 * time.Second
	maxBodyBytes     = 1 << 20
	maxKeyLen        = 255
	maxAmount        = 99_999_999
	defaultListLimit = 100
	maxListLimit     = 1000

	statusSucceeded = "succeeded"
	statusFailed    = "failed"

	tokenLostResponse = "pm_card_lostResponse"
)

// behaviour is what a payment method token makes the simulator do.
type behaviour int

const (
	succeed behaviour = iota
	decline
	slow
	providerError
	lostResponse
)

type tokenSpec struct {
	behaviour      behaviour
	failureCode    string
	failureMessage string
}

// tokens are the payment methods the simulator knows; any other is refused.
var tokens = map[string]tokenSpec{
	"pm_card_visa":              {behaviour: succeed},
	"pm_card_mastercard":        {behaviour: succeed},
	"pm_card_chargeDeclined":    {behaviour: decline, failureCode: "card_declined", failureMessage: "Your card was declined."},
	"pm_card_insufficientFunds": {behaviour: decline, failureCode: "insufficient_funds", failureMessage: "Your card has insufficient funds."},
	"pm_card_slow":              {behaviour: slow},
	"pm_card_providerError":     {behaviour: providerError},
	tokenLostResponse:           {behaviour: lostResponse},
}

type handler struct {
	queries   *sqlc.Queries
	slowDelay time.Duration
	log       *slog.Logger
}

// NewHandler returns the simulator's HTTP API, with paths starting at /v1
// (chargeonce mounts it under /provider with http.StripPrefix). The tables of
// the cardsim schema must exist (db.Migrate creates them).
func NewHandler(pool *pgxpool.Pool, cfg Config) http.Handler {
	h := &handler{
		queries:   sqlc.New(pool),
		slowDelay: cfg.SlowDelay,
		log:       cfg.Logger,
	}
	if h.slowDelay <= 0 {
		h.slowDelay = defaultSlowDelay
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", h.createCharge)
	mux.HandleFunc("GET /v1/charges", h.listCharges)
	mux.HandleFunc("GET /v1/charges/{id}", h.getCharge)
	// Catch-alls, less specific than the patterns above, so that every answer
	// is JSON: ServeMux's own 404 and 405 answers are plain text.
	mux.HandleFunc("/v1/charges", methodNotAllowed("GET, HEAD, POST"))
	mux.HandleFunc("/v1/charges/{id}", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, apiError{
			Type: "invalid_request_error", Code: "resource_missing",
			Message: fmt.Sprintf("Unrecognized request URL (%s %s).", r.Method, r.URL.Path),
		})
	})
	return mux
}

// chargeObject is the wire form of a charge, in every response.
type chargeObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	PaymentMethod  string            `json:"payment_method"`
	Description    *string           `json:"description"`
	FailureCode    *string           `json:"failure_code"`
	FailureMessage *string           `json:"failure_message"`
	IdempotencyKey string            `json:"idempotency_key"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
}

type listObject struct {
	Object string         `json:"object"`
	Data   []chargeObject `json:"data"`
}

type apiError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Charge  string `json:"charge,omitempty"` // only for card_error
}

func invalidRequest(code, message string) apiError {
	return apiError{Type: "invalid_request_error", Code: code, Message: message}
}

var internalError = apiError{Type: "api_error", Code: "internal_error", Message: "The card simulator failed to process the request."}

// createRequest is the validated body of POST /v1/charges.
type createRequest struct {
	Amount        int64
	Currency      string
	PaymentMethod string
	Description   *string
	Metadata      map[string]string
}

func (h *handler) createCharge(w http.ResponseWriter, r *http.Request) {
	key, keyErr := idempotencyKey(r)
	if keyErr != nil {
		writeError(w, http.StatusBadRequest, *keyErr)
		return
	}
	req, reqErr := decodeCreateRequest(w, r)
	if reqErr != nil {
		writeError(w, http.StatusBadRequest, *reqErr)
		return
	}
	spec, known := tokens[req.PaymentMethod]
	if !known {
		writeError(w, http.StatusBadRequest, invalidRequest("payment_method_unknown",
			fmt.Sprintf("No such payment method: %q.", req.PaymentMethod)))
		return
	}
	if spec.behaviour == providerError {
		// Before any storage, so that every call fails alike, repeats included.
		h.log.Info("cardsim: simulated provider error", "idempotency_key", key)
		writeError(w, http.StatusInternalServerError, apiError{
			Type: "api_error", Code: "provider_error", Message: "The card provider failed to process the charge.",
		})
		return
	}

	// From here on the charge goes through even if the client goes away, as at
	// a real provider: a client that timed out must find its charge later. The
	// context keeps the request's values but none of its cancellation, not
	// even the server's shutdown: the work is bounded by the slow timer and
	// storeTimeout instead, so a shutdown waits at most that long for it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.slowDelay+storeTimeout)
	defer cancel()
	if spec.behaviour == slow {
		timer := time.NewTimer(h.slowDelay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
	}

	charge, replayed, err := h.storeCharge(ctx, key, req, spec)
	if errors.Is(err, errKeyReused) {
		writeError(w, http.StatusConflict, apiError{
			Type: "idempotency_error", Code: "idempotency_key_reused",
			Message: "This idempotency key was already used with other request parameters.",
		})
		return
	}
	if err != nil {
		h.log.Error("cardsim: store charge", "idempotency_key", key, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	h.log.Info("cardsim: charge", "id", charge.ID, "status", charge.Status,
		"payment_method", redactToken(charge.PaymentMethod), "replayed", replayed)
	h.answerCharge(w, charge, replayed)
}

// redactToken shortens a card token for the log: its first half, at most 8
// characters, then "…". A log line never carries a whole token.
func redactToken(token string) string {
	return token[:min(8, len(token)/2)] + "…"
}

var errKeyReused = errors.New("idempotency key reused with other parameters")

// storeCharge stores the charge of key, or finds the one stored by an earlier
// request with that key (replayed is then true). The insert alone decides who
// wins a key, so concurrent requests cannot store two charges.
func (h *handler) storeCharge(ctx context.Context, key string, req createRequest, spec tokenSpec) (charge sqlc.CardsimCharge, replayed bool, err error) {
	metadata, err := json.Marshal(req.Metadata)
	if err != nil {
		return charge, false, err
	}
	hash := requestHash(req)
	params := sqlc.CardsimInsertChargeParams{
		ID:             newChargeID(),
		IdempotencyKey: key,
		RequestHash:    hash,
		Amount:         req.Amount,
		Currency:       req.Currency,
		PaymentMethod:  req.PaymentMethod,
		Description:    req.Description,
		Status:         statusSucceeded,
		Metadata:       metadata,
	}
	if spec.behaviour == decline {
		params.Status = statusFailed
		params.FailureCode = &spec.failureCode
		params.FailureMessage = &spec.failureMessage
	}
	charge, err = h.queries.CardsimInsertCharge(ctx, params)
	if err == nil {
		return charge, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return charge, false, fmt.Errorf("insert charge: %w", err)
	}
	// No row: the key is taken. Charges are never deleted, so it is there.
	charge, err = h.queries.CardsimGetChargeByIdempotencyKey(ctx, key)
	if err != nil {
		return charge, false, fmt.Errorf("load charge of reused key: %w", err)
	}
	if !bytes.Equal(charge.RequestHash, hash) {
		return charge, false, errKeyReused
	}
	return charge, true, nil
}

// answerCharge answers a stored charge; a replay answers exactly as the first
// time, lost response included.
func (h *handler) answerCharge(w http.ResponseWriter, charge sqlc.CardsimCharge, replayed bool) {
	if charge.PaymentMethod == tokenLostResponse {
		dropConnection(w)
		return
	}
	obj, err := toChargeObject(charge)
	if err != nil {
		h.log.Error("cardsim: decode stored charge", "id", charge.ID, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if charge.Status == statusFailed {
		writeError(w, http.StatusPaymentRequired, apiError{
			Type: "card_error", Code: deref(charge.FailureCode), Message: deref(charge.FailureMessage), Charge: charge.ID,
		})
		return
	}
	writeJSON(w, http.StatusOK, obj)
}

// dropConnection closes the connection without writing a response: the
// charge is stored but the client cannot know it, as when a network fails
// after the provider charged the card.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2 connections cannot be hijacked: abort the stream instead,
		// which the server does without writing a response.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

func (h *handler) listCharges(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	params := sqlc.CardsimListChargesParams{RowLimit: defaultListLimit}
	if query.Has("limit") {
		limit, err := strconv.Atoi(query.Get("limit"))
		if err != nil || limit < 1 || limit > maxListLimit {
			writeError(w, http.StatusBadRequest, invalidRequest("limit_invalid",
				fmt.Sprintf("limit must be an integer from 1 to %d.", maxListLimit)))
			return
		}
		params.RowLimit = int32(limit)
	}
	// A filter that is given applies as given, even empty: an empty key
	// matches nothing rather than everything, so a caller's bug cannot make
	// another charge look like its own.
	filter := func(name string) *string {
		if !query.Has(name) {
			return nil
		}
		v := query.Get(name)
		return &v
	}
	params.IdempotencyKey = filter("idempotency_key")
	params.ClientIdempotencyKey = filter("client_idempotency_key")
	params.Merchant = filter("merchant")

	charges, err := h.queries.CardsimListCharges(r.Context(), params)
	if err != nil {
		h.log.Error("cardsim: list charges", "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	list := listObject{Object: "list", Data: make([]chargeObject, 0, len(charges))}
	for _, c := range charges {
		obj, err := toChargeObject(c)
		if err != nil {
			h.log.Error("cardsim: decode stored charge", "id", c.ID, "err", err)
			writeError(w, http.StatusInternalServerError, internalError)
			return
		}
		list.Data = append(list.Data, obj)
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *handler) getCharge(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	charge, err := h.queries.CardsimGetCharge(r.Context(), id)
	if errors.Is(err, pgx.ErrNoRows) {
		writeError(w, http.StatusNotFound, invalidRequest("resource_missing", fmt.Sprintf("No such charge: %q.", id)))
		return
	}
	if err != nil {
		h.log.Error("cardsim: get charge", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	obj, err := toChargeObject(charge)
	if err != nil {
		h.log.Error("cardsim: decode stored charge", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	writeJSON(w, http.StatusOK, obj)
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, invalidRequest("method_not_allowed",
			fmt.Sprintf("Method %s is not allowed here; allowed: %s.", r.Method, allow)))
	}
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
	}
	fail := func(code, message string) (createRequest, *apiError) {
		e := invalidRequest(code, message)
		return createRequest{}, &e
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(&body); err != nil {
		var typeErr *json.UnmarshalTypeError
		var sizeErr *http.MaxBytesError
		switch {
		case errors.As(err, &sizeErr):
			return fail("body_invalid", fmt.Sprintf("The request body is larger than %d bytes.", maxBodyBytes))
		case errors.As(err, &typeErr):
			switch field, _, _ := strings.Cut(typeErr.Field, "."); field {
			case "amount":
				return fail("amount_invalid", fmt.Sprintf("amount must be an integer from 1 to %d.", maxAmount))
			case "currency":
				return fail("currency_invalid", "currency must be a three-letter ISO 4217 code.")
			case "payment_method":
				return fail("payment_method_invalid", "payment_method must be a string.")
			case "description":
				return fail("description_invalid", "description must be a string or null.")
			case "metadata":
				return fail("metadata_invalid", "metadata must be an object of string values.")
			}
			return fail("body_invalid", "The request body must be a JSON object.")
		case errors.Is(err, io.EOF):
			return fail("body_invalid", "The request body is empty.")
		default:
			return fail("body_invalid", "The request body is not valid JSON: "+err.Error())
		}
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return fail("body_invalid", "The request body must hold a single JSON object.")
	}

	if body.Amount < 1 || body.Amount > maxAmount {
		return fail("amount_invalid", fmt.Sprintf("amount must be an integer from 1 to %d.", maxAmount))
	}
	if len(body.Currency) != 3 || strings.ContainsFunc(body.Currency, func(c rune) bool {
		return (c < 'A' || c > 'Z') && (c < 'a' || c > 'z')
	}) {
		return fail("currency_invalid", "currency must be a three-letter ISO 4217 code.")
	}
	if body.PaymentMethod == "" {
		return fail("payment_method_missing", "payment_method is required.")
	}
	// PostgreSQL text and jsonb cannot hold NUL: refuse it here rather than fail later.
	if body.Description != nil && strings.ContainsRune(*body.Description, 0) {
		return fail("description_invalid", "description must not contain NUL characters.")
	}
	metadata := make(map[string]string, len(body.Metadata))
	for k, v := range body.Metadata {
		if v == nil || strings.ContainsRune(k, 0) || strings.ContainsRune(*v, 0) {
			return fail("metadata_invalid", "metadata must be an object of string values.")
		}
		metadata[k] = *v
	}
	return createRequest{
		Amount: body.Amount,
		// One spelling per currency, so that "usd" and "USD" are one request.
		Currency:      strings.ToUpper(body.Currency),
		PaymentMethod: body.PaymentMethod,
		Description:   body.Description,
		Metadata:      metadata,
	}, nil
}

// requestHash is the SHA-256 of a canonical encoding of the charge's
// parameters: a version tag, then each field length-prefixed (so no two
// requests encode alike), metadata sorted by key, and null description told
// apart from an empty one.
func requestHash(req createRequest) []byte {
	var buf []byte
	putString := func(s string) {
		buf = binary.BigEndian.AppendUint64(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	putString("cardsim.charge.v1")
	buf = binary.BigEndian.AppendUint64(buf, uint64(req.Amount))
	putString(req.Currency)
	putString(req.PaymentMethod)
	if req.Description == nil {
		buf = append(buf, 0)
	} else {
		buf = append(buf, 1)
		putString(*req.Description)
	}
	keys := make([]string, 0, len(req.Metadata))
	for k := range req.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(keys)))
	for _, k := range keys {
		putString(k)
		putString(req.Metadata[k])
	}
	sum := sha256.Sum256(buf)
	return sum[:]
}

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// newChargeID returns "ch_" and 24 random alphanumerics, drawn without modulo
// bias from crypto/rand so that ids cannot be guessed.
func newChargeID() string {
	const n = 24
	id := make([]byte, 0, 3+n)
	id = append(id, "ch_"...)
	var random [32]byte
	for len(id) < cap(id) {
		_, _ = rand.Read(random[:]) // never fails (crypto/rand since Go 1.24)
		for _, b := range random {
			// 248 is the largest multiple of 62 within a byte.
			if b < 248 && len(id) < cap(id) {
				id = append(id, idAlphabet[int(b)%len(idAlphabet)])
			}
		}
	}
	return string(id)
}

func toChargeObject(c sqlc.CardsimCharge) (chargeObject, error) {
	metadata := map[string]string{}
	if err := json.Unmarshal(c.Metadata, &metadata); err != nil {
		return chargeObject{}, err
	}
	return chargeObject{
		ID:             c.ID,
		Object:         "charge",
		Amount:         c.Amount,
		Currency:       c.Currency,
		Status:         c.Status,
		PaymentMethod:  c.PaymentMethod,
		Description:    c.Description,
		FailureCode:    c.FailureCode,
		FailureMessage: c.FailureMessage,
		IdempotencyKey: c.IdempotencyKey,
		Metadata:       metadata,
		Created:        c.CreatedAt.Unix(),
	}, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own plain structs are encoded: this cannot happen.
		panic(fmt.Sprintf("cardsim: encode response: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, status int, e apiError) {
	writeJSON(w, status, struct {
		Error apiError `json:"error"`
	}{e})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
