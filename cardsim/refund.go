package cardsim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Refunds, modelled on Stripe's: POST /v1/refunds refunds a succeeded
// charge, in full or in part, once per idempotency key; a refund that would
// take more than remains of the charge, or one of a charge that did not
// succeed, is refused with a 400 whose code says why, and nothing is
// stored. The charge's card decides how its refunds end (see tokens).

// The codes of a refused refund, Stripe's.
const (
	codeChargeNotRefundable   = "charge_not_refundable"
	codeChargeAlreadyRefunded = "charge_already_refunded"
	codeAmountTooLarge        = "amount_too_large"
)

// codeExpiredOrCanceledCard is why a refund fails after it was accepted:
// the card the money went back to was closed (Stripe's failure_reason).
const (
	codeExpiredOrCanceledCard    = "expired_or_canceled_card"
	messageExpiredOrCanceledCard = "The refund failed: the card it went back to is expired or canceled."
)

// refundRequest is the validated body of POST /v1/refunds.
type refundRequest struct {
	Charge   string
	Amount   int64 // 0: what remains of the charge
	Reason   *string
	Metadata map[string]string
}

// decodeRefundRequest reads and validates the body of POST /v1/refunds.
func decodeRefundRequest(w http.ResponseWriter, r *http.Request) (refundRequest, *apiError) {
	var body struct {
		Charge   string             `json:"charge"`
		Amount   *int64             `json:"amount"`
		Reason   *string            `json:"reason"`
		Metadata map[string]*string `json:"metadata"` // pointers, to refuse null values
	}
	fail := func(code, message string) (refundRequest, *apiError) {
		e := invalidRequest(code, message)
		return refundRequest{}, &e
	}
	fieldError := func(field string) (apiError, bool) {
		switch field {
		case "charge":
			return invalidRequest("charge_invalid", "charge must be a string."), true
		case "amount":
			return invalidRequest("amount_invalid", amountRule), true
		case "reason":
			return invalidRequest("reason_invalid", "reason must be a string or null."), true
		case "metadata":
			return invalidRequest("metadata_invalid", metadataRule), true
		}
		return apiError{}, false
	}
	if e := decodeObject(w, r, &body, fieldError); e != nil {
		return refundRequest{}, e
	}
	if body.Charge == "" {
		return fail("charge_missing", "charge is required: the id of the charge to refund.")
	}
	if strings.ContainsRune(body.Charge, 0) {
		return fail("charge_invalid", "charge must not contain NUL characters.")
	}
	if body.Amount != nil && (*body.Amount < 1 || *body.Amount > maxAmount) {
		return fail("amount_invalid", amountRule)
	}
	if body.Reason != nil && strings.ContainsRune(*body.Reason, 0) {
		return fail("reason_invalid", "reason must not contain NUL characters.")
	}
	metadata, ok := decodeMetadata(body.Metadata)
	if !ok {
		return fail("metadata_invalid", metadataRule)
	}
	req := refundRequest{Charge: body.Charge, Reason: body.Reason, Metadata: metadata}
	if body.Amount != nil {
		req.Amount = *body.Amount
	}
	return req, nil
}

// refundHash is the SHA-256 of a canonical encoding of the refund's
// parameters as requested (an amount not given is 0, what no given amount
// is), as requestHash is of a charge's.
func refundHash(req refundRequest) []byte {
	var c canonical
	c.putString("cardsim.refund.v1")
	c.putString(req.Charge)
	c.putInt(req.Amount)
	c.putOptional(req.Reason)
	c.putMetadata(req.Metadata)
	sum := sha256.Sum256(c)
	return sum[:]
}

// refundFilter is the validated query of GET /v1/refunds. A nil filter was
// not given.
type refundFilter struct {
	Charge         *string
	IdempotencyKey *string
	Merchant       *string
	Status         *string
	page
}

// refundStatuses are the statuses a list of refunds may be filtered by.
var refundStatuses = []string{statusPending, statusSucceeded, statusFailed}

// parseRefundQuery reads and validates the query of GET /v1/refunds.
func parseRefundQuery(r *http.Request) (refundFilter, *apiError) {
	query := r.URL.Query()
	p, e := listPage(query)
	if e != nil {
		return refundFilter{}, e
	}
	status, e := statusFilter(query, refundStatuses)
	if e != nil {
		return refundFilter{}, e
	}
	return refundFilter{
		Charge:         queryFilter(query, "charge"),
		IdempotencyKey: queryFilter(query, "idempotency_key"),
		Merchant:       queryFilter(query, "merchant"),
		Status:         status,
		page:           p,
	}, nil
}

func (h *handler) createRefund(w http.ResponseWriter, r *http.Request) {
	key, keyErr := idempotencyKey(r)
	if keyErr != nil {
		writeError(w, http.StatusBadRequest, *keyErr)
		return
	}
	req, reqErr := decodeRefundRequest(w, r)
	if reqErr != nil {
		writeError(w, http.StatusBadRequest, *reqErr)
		return
	}
	// As a charge, the refund goes through even if the client goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeTimeout)
	defer cancel()
	rf, replayed, err := h.store.createRefund(ctx, key, req, h.refundSettle)
	var refused *refusal
	switch {
	case errors.As(err, &refused):
		h.log.Info("cardsim: refund refused", "idempotency_key", key, "charge", req.Charge, "code", refused.code)
		writeError(w, http.StatusBadRequest, apiError{
			Type: "invalid_request_error", Code: refused.code, Message: refused.message, Charge: req.Charge,
		})
		return
	case errors.Is(err, errKeyReused):
		writeError(w, http.StatusConflict, keyReusedError)
		return
	case err != nil:
		h.log.Error("cardsim: store refund", "idempotency_key", key, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	h.log.Info("cardsim: refund", "id", rf.ID, "charge", rf.ChargeID, "amount", rf.Amount,
		"status", rf.Status, "replayed", replayed)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusOK, toRefundObject(rf))
}

func (h *handler) getRefund(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rf, err := h.store.getRefund(r.Context(), id)
	if errors.Is(err, errNoRefund) {
		writeError(w, http.StatusNotFound, invalidRequest("resource_missing", fmt.Sprintf("No such refund: %q.", id)))
		return
	}
	if err != nil {
		h.log.Error("cardsim: get refund", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	writeJSON(w, http.StatusOK, toRefundObject(rf))
}

func (h *handler) listRefunds(w http.ResponseWriter, r *http.Request) {
	filter, reqErr := parseRefundQuery(r)
	if reqErr != nil {
		writeError(w, http.StatusBadRequest, *reqErr)
		return
	}
	refunds, more, err := h.store.listRefunds(r.Context(), filter)
	if errors.Is(err, errNoRefund) {
		writeError(w, http.StatusBadRequest, noSuchStart("refund", *filter.StartingAfter))
		return
	}
	if err != nil {
		h.log.Error("cardsim: list refunds", "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	list := listObject[refundObject]{Object: "list", Data: make([]refundObject, 0, len(refunds)), HasMore: more}
	for _, rf := range refunds {
		list.Data = append(list.Data, toRefundObject(rf))
	}
	writeJSON(w, http.StatusOK, list)
}

// failRefund is a control for tests, as the challenge's buttons are: the
// refund fails with expired_or_canceled_card, pending or succeeded, as when
// the card it went back to was closed. One that failed already is refused
// with refund_unexpected_state.
func (h *handler) failRefund(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rf, failed, err := h.store.failRefund(r.Context(), id)
	if errors.Is(err, errNoRefund) {
		writeError(w, http.StatusNotFound, invalidRequest("resource_missing", fmt.Sprintf("No such refund: %q.", id)))
		return
	}
	if err != nil {
		h.log.Error("cardsim: fail refund", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	h.log.Info("cardsim: fail refund", "id", rf.ID, "charge", rf.ChargeID, "status", rf.Status, "failed", failed)
	if !failed {
		writeError(w, http.StatusBadRequest, apiError{
			Type: "invalid_request_error", Code: "refund_unexpected_state", Charge: rf.ChargeID,
			Message: fmt.Sprintf("This refund's status is %s: only a refund that is %s or %s can fail.",
				rf.Status, statusPending, statusSucceeded),
		})
		return
	}
	writeJSON(w, http.StatusOK, toRefundObject(rf))
}
