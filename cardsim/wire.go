package cardsim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

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

func toChargeObject(c charge) chargeObject {
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
		Metadata:       c.Metadata,
		Created:        c.Created.Unix(),
	}
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
