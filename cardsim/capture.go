package cardsim

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Authorize now, capture later, modelled on Stripe's manual capture. A
// charge made with capture_method manual only authorizes (status
// succeeded, authorization_status open) until authorization_expires_at.
// POST /v1/captures takes part or all of it, once per idempotency key;
// several captures may follow each other, and one marked final releases
// the rest. POST /v1/voids releases all of it, once per key. A capture or
// void that the authorization refuses (expired, voided, captured, more
// than remains) is a 400 whose code says why, and nothing is stored. The
// charge's card decides how its captures go (see tokens): declined,
// slow, or made with the answer lost.

// The codes of a refused capture or void. They are the strings of
// chargeonce's payment.Failure* constants, repeated rather than imported,
// as the codes of 3-D Secure are.
const (
	codeAuthorizationExpired        = "authorization_expired"
	codeCaptureExceedsAuthorization = "capture_exceeds_authorization"
	codeChargeNotCapturable         = "charge_not_capturable"
	codeChargeVoided                = "charge_voided"
	codeChargeCaptured              = "charge_captured"
)

// captureRequest is the validated body of POST /v1/captures.
type captureRequest struct {
	Charge   string
	Amount   int64   // 0: what remains capturable
	Currency *string // nil: not given; else upper case, and must be the charge's
	Final    bool    // true unless given false, as Stripe's final_capture
	Metadata map[string]string
}

// voidRequest is the validated body of POST /v1/voids.
type voidRequest struct {
	Charge   string
	Metadata map[string]string
}

// decodeCaptureRequest reads and validates the body of POST /v1/captures.
func decodeCaptureRequest(w http.ResponseWriter, r *http.Request) (captureRequest, *apiError) {
	var body struct {
		Charge   string             `json:"charge"`
		Amount   *int64             `json:"amount"`
		Currency *string            `json:"currency"`
		Final    *bool              `json:"final"`
		Metadata map[string]*string `json:"metadata"`
	}
	fail := func(code, message string) (captureRequest, *apiError) {
		e := invalidRequest(code, message)
		return captureRequest{}, &e
	}
	fieldError := func(field string) (apiError, bool) {
		switch field {
		case "charge":
			return invalidRequest("charge_invalid", "charge must be a string."), true
		case "amount":
			return invalidRequest("amount_invalid", amountRule), true
		case "currency":
			return invalidRequest("currency_invalid", currencyRule), true
		case "final":
			return invalidRequest("final_invalid", "final must be true or false."), true
		case "metadata":
			return invalidRequest("metadata_invalid", metadataRule), true
		}
		return apiError{}, false
	}
	if e := decodeObject(w, r, &body, fieldError); e != nil {
		return captureRequest{}, e
	}
	charge, e := chargeField(body.Charge, "capture")
	if e != nil {
		return captureRequest{}, e
	}
	if body.Amount != nil && (*body.Amount < 1 || *body.Amount > maxAmount) {
		return fail("amount_invalid", amountRule)
	}
	req := captureRequest{Charge: charge, Final: body.Final == nil || *body.Final}
	if body.Amount != nil {
		req.Amount = *body.Amount
	}
	if body.Currency != nil {
		if !validCurrency(*body.Currency) {
			return fail("currency_invalid", currencyRule)
		}
		req.Currency = new(strings.ToUpper(*body.Currency))
	}
	var ok bool
	if req.Metadata, ok = decodeMetadata(body.Metadata); !ok {
		return fail("metadata_invalid", metadataRule)
	}
	return req, nil
}

// decodeVoidRequest reads and validates the body of POST /v1/voids.
func decodeVoidRequest(w http.ResponseWriter, r *http.Request) (voidRequest, *apiError) {
	var body struct {
		Charge   string             `json:"charge"`
		Metadata map[string]*string `json:"metadata"`
	}
	fieldError := func(field string) (apiError, bool) {
		switch field {
		case "charge":
			return invalidRequest("charge_invalid", "charge must be a string."), true
		case "metadata":
			return invalidRequest("metadata_invalid", metadataRule), true
		}
		return apiError{}, false
	}
	if e := decodeObject(w, r, &body, fieldError); e != nil {
		return voidRequest{}, e
	}
	charge, e := chargeField(body.Charge, "void")
	if e != nil {
		return voidRequest{}, e
	}
	metadata, ok := decodeMetadata(body.Metadata)
	if !ok {
		e := invalidRequest("metadata_invalid", metadataRule)
		return voidRequest{}, &e
	}
	return voidRequest{Charge: charge, Metadata: metadata}, nil
}

// chargeField checks the charge that a request names, to what.
func chargeField(charge, what string) (string, *apiError) {
	if charge == "" {
		e := invalidRequest("charge_missing", "charge is required: the id of the authorization to "+what+".")
		return "", &e
	}
	if strings.ContainsRune(charge, 0) {
		e := invalidRequest("charge_invalid", "charge must not contain NUL characters.")
		return "", &e
	}
	return charge, nil
}

// captureHash is the SHA-256 of a canonical encoding of the capture's
// parameters as requested, as requestHash is of a charge's.
func captureHash(req captureRequest) []byte {
	var c canonical
	c.putString("cardsim.capture.v1")
	c.putString(req.Charge)
	c.putInt(req.Amount)
	c.putOptional(req.Currency)
	c.putBool(req.Final)
	c.putMetadata(req.Metadata)
	sum := sha256.Sum256(c)
	return sum[:]
}

// voidHash is the SHA-256 of a canonical encoding of the void's parameters.
func voidHash(req voidRequest) []byte {
	var c canonical
	c.putString("cardsim.void.v1")
	c.putString(req.Charge)
	c.putMetadata(req.Metadata)
	sum := sha256.Sum256(c)
	return sum[:]
}

// captureFilter is the validated query of GET /v1/captures, voidFilter of
// GET /v1/voids. A nil filter was not given.
type captureFilter struct {
	Charge         *string
	IdempotencyKey *string
	AttemptID      *string // chargeonce's attempt, in the metadata
	Merchant       *string
	Status         *string
	page
}

type voidFilter struct {
	Charge         *string
	IdempotencyKey *string
	AttemptID      *string
	Merchant       *string
	page
}

// parseCaptureQuery reads and validates the query of GET /v1/captures.
func parseCaptureQuery(r *http.Request) (captureFilter, *apiError) {
	query := r.URL.Query()
	p, e := listPage(query)
	if e != nil {
		return captureFilter{}, e
	}
	status, e := statusFilter(query, []string{statusSucceeded, statusFailed})
	if e != nil {
		return captureFilter{}, e
	}
	return captureFilter{
		Charge:         queryFilter(query, "charge"),
		IdempotencyKey: queryFilter(query, "idempotency_key"),
		AttemptID:      queryFilter(query, "attempt_id"),
		Merchant:       queryFilter(query, "merchant"),
		Status:         status,
		page:           p,
	}, nil
}

// parseVoidQuery reads and validates the query of GET /v1/voids.
func parseVoidQuery(r *http.Request) (voidFilter, *apiError) {
	query := r.URL.Query()
	p, e := listPage(query)
	if e != nil {
		return voidFilter{}, e
	}
	return voidFilter{
		Charge:         queryFilter(query, "charge"),
		IdempotencyKey: queryFilter(query, "idempotency_key"),
		AttemptID:      queryFilter(query, "attempt_id"),
		Merchant:       queryFilter(query, "merchant"),
		page:           p,
	}, nil
}

func (h *handler) createCapture(w http.ResponseWriter, r *http.Request) {
	key, keyErr := idempotencyKey(r)
	if keyErr != nil {
		writeError(w, http.StatusBadRequest, *keyErr)
		return
	}
	req, reqErr := decodeCaptureRequest(w, r)
	if reqErr != nil {
		writeError(w, http.StatusBadRequest, *reqErr)
		return
	}
	// As a charge, the capture goes through even if the client goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.slowDelay+storeTimeout)
	defer cancel()
	card, err := h.store.paymentMethod(ctx, req.Charge)
	if err != nil && !errors.Is(err, errNoCharge) {
		h.log.Error("cardsim: load charge of capture", "charge", req.Charge, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	behaviour := tokens[card].captures
	if behaviour == capturesSlow {
		sleep(ctx, h.slowDelay)
	}
	p, replayed, err := h.store.createCapture(ctx, key, req)
	if h.refused(w, "capture", key, req.Charge, err) {
		return
	}
	h.log.Info("cardsim: capture", "id", p.ID, "charge", p.ChargeID, "amount", p.Amount, "final", p.Final,
		"status", p.Status, "replayed", replayed)
	if behaviour == capturesLoseResponse {
		dropConnection(w)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if p.Status == statusFailed {
		writeError(w, http.StatusPaymentRequired, apiError{
			Type: "card_error", Code: deref(p.FailureCode), Message: deref(p.FailureMessage), Charge: p.ChargeID, Capture: p.ID,
		})
		return
	}
	writeJSON(w, http.StatusOK, toCaptureObject(p))
}

func (h *handler) createVoid(w http.ResponseWriter, r *http.Request) {
	key, keyErr := idempotencyKey(r)
	if keyErr != nil {
		writeError(w, http.StatusBadRequest, *keyErr)
		return
	}
	req, reqErr := decodeVoidRequest(w, r)
	if reqErr != nil {
		writeError(w, http.StatusBadRequest, *reqErr)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeTimeout)
	defer cancel()
	v, replayed, err := h.store.createVoid(ctx, key, req)
	if h.refused(w, "void", key, req.Charge, err) {
		return
	}
	h.log.Info("cardsim: void", "id", v.ID, "charge", v.ChargeID, "replayed", replayed)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusOK, toVoidObject(v))
}

// refused answers a create whose store said err, of what ("capture",
// "void") of charge under key, unless err is nil: a refusal, a reused key,
// or a failure. It reports whether it answered.
func (h *handler) refused(w http.ResponseWriter, what, key, charge string, err error) bool {
	var refused *refusal
	switch {
	case err == nil:
		return false
	case errors.As(err, &refused):
		h.log.Info("cardsim: "+what+" refused", "idempotency_key", key, "charge", charge, "code", refused.code)
		writeError(w, http.StatusBadRequest, apiError{
			Type: "invalid_request_error", Code: refused.code, Message: refused.message, Charge: charge,
		})
	case errors.Is(err, errKeyReused):
		writeError(w, http.StatusConflict, keyReusedError)
	default:
		h.log.Error("cardsim: store "+what, "idempotency_key", key, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
	}
	return true
}

func (h *handler) getCapture(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := h.store.getCapture(r.Context(), id)
	if h.notFound(w, "capture", id, err, errNoCapture) {
		return
	}
	writeJSON(w, http.StatusOK, toCaptureObject(p))
}

func (h *handler) getVoid(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	v, err := h.store.getVoid(r.Context(), id)
	if h.notFound(w, "void", id, err, errNoVoid) {
		return
	}
	writeJSON(w, http.StatusOK, toVoidObject(v))
}

// notFound answers a read of what id that got err, unless err is nil: 404
// for noSuch, else 500. It reports whether it answered.
func (h *handler) notFound(w http.ResponseWriter, what, id string, err, noSuch error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, noSuch):
		writeError(w, http.StatusNotFound, invalidRequest("resource_missing", fmt.Sprintf("No such %s: %q.", what, id)))
	default:
		h.log.Error("cardsim: get "+what, "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
	}
	return true
}

func (h *handler) listCaptures(w http.ResponseWriter, r *http.Request) {
	filter, reqErr := parseCaptureQuery(r)
	if reqErr != nil {
		writeError(w, http.StatusBadRequest, *reqErr)
		return
	}
	captures, more, err := h.store.listCaptures(r.Context(), filter)
	if h.listFailed(w, "capture", filter.StartingAfter, err, errNoCapture) {
		return
	}
	list := listObject[captureObject]{Object: "list", Data: make([]captureObject, 0, len(captures)), HasMore: more}
	for _, p := range captures {
		list.Data = append(list.Data, toCaptureObject(p))
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *handler) listVoids(w http.ResponseWriter, r *http.Request) {
	filter, reqErr := parseVoidQuery(r)
	if reqErr != nil {
		writeError(w, http.StatusBadRequest, *reqErr)
		return
	}
	voids, more, err := h.store.listVoids(r.Context(), filter)
	if h.listFailed(w, "void", filter.StartingAfter, err, errNoVoid) {
		return
	}
	list := listObject[voidObject]{Object: "list", Data: make([]voidObject, 0, len(voids)), HasMore: more}
	for _, v := range voids {
		list.Data = append(list.Data, toVoidObject(v))
	}
	writeJSON(w, http.StatusOK, list)
}

// listFailed answers a list of what that got err, unless err is nil: 400
// for a page after noSuch item, else 500. It reports whether it answered.
func (h *handler) listFailed(w http.ResponseWriter, what string, startingAfter *string, err, noSuch error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, noSuch):
		writeError(w, http.StatusBadRequest, noSuchStart(what, *startingAfter))
	default:
		h.log.Error("cardsim: list "+what+"s", "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
	}
	return true
}

// expireAuthorization is a control for tests, as the refund's fail is: the
// open authorization of the charge expires now, as if its window had
// passed. One that is not open is refused with charge_unexpected_state.
func (h *handler) expireAuthorization(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, expired, err := h.store.expireNow(r.Context(), id)
	if h.notFound(w, "charge", id, err, errNoCharge) {
		return
	}
	h.log.Info("cardsim: expire authorization", "id", c.ID, "authorization_status", deref(c.AuthorizationStatus), "expired", expired)
	if !expired {
		writeError(w, http.StatusBadRequest, apiError{
			Type: "invalid_request_error", Code: "charge_unexpected_state", Charge: c.ID,
			Message: fmt.Sprintf("This charge's authorization is %s: only an open authorization can expire.",
				cmp.Or(deref(c.AuthorizationStatus), "none")),
		})
		return
	}
	writeJSON(w, http.StatusOK, toChargeObject(c, h.publicBase(r)))
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
