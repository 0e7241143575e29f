package app

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"chargeonce/graph"
	"chargeonce/merchant"
	"chargeonce/payment"
)

// demoCheckoutSession is the demo's "shop backend", in development only:
// what a merchant's server does before its checkout page pays. It creates a
// checkout session for the cart with the demo merchant's secret key, on the
// server side, and gives the page the session's client secret and the
// publishable key to pay it with; the secret key never reaches the page.
// POST /demo/checkout-session {"cartId", "amount", "currency", "orderId"?,
// "description"?, "returnUrl"?}: idempotent on cartId, as a shop's backend
// keys the session on its cart. A returnUrl (customer authentication) must
// be on the demo's own origin, this server's: where a merchant's server
// would name one of its registered origins.
func (a *App) demoCheckoutSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CartID      string  `json:"cartId"`
		Amount      int64   `json:"amount"`
		Currency    string  `json:"currency"`
		OrderID     *string `json:"orderId"`
		Description *string `json:"description"`
		ReturnURL   *string `json:"returnUrl"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeDemoError(w, payment.Invalid("", "send a JSON object: {\"cartId\", \"amount\", \"currency\", \"orderId\"?, \"description\"?, \"returnUrl\"?}"))
		return
	}
	if len(req.CartID) > 100 {
		writeDemoError(w, payment.Invalid("cartId", "cartId is at most 100 characters"))
		return
	}
	key := "demo-cart:" + req.CartID
	if req.CartID == "" {
		key = "" // refused as an empty key
	}
	in := payment.SessionInput{Amount: req.Amount, Currency: req.Currency}
	if req.OrderID != nil {
		in.OrderID = *req.OrderID
	}
	if req.Description != nil {
		in.Description = *req.Description
	}
	if req.ReturnURL != nil {
		in.ReturnURL = *req.ReturnURL
		if u, err := url.Parse(in.ReturnURL); err != nil || u.Host != r.Host {
			writeDemoError(w, payment.Invalid("returnUrl", "the demo's returnUrl must be on its own origin, %s", r.Host))
			return
		}
	}
	res, err := a.payments.CreateCheckoutSession(r.Context(), a.demo, merchant.SessionSeed(a.cfg.DemoAPIKey), key, in)
	if err != nil {
		writeDemoError(w, err)
		return
	}
	s := res.Session
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": s.ID, "clientSecret": res.ClientSecret, "publishableKey": a.cfg.DemoPublishableKey,
		"amount": s.Input.Amount, "currency": s.Input.Currency, "orderId": optionalString(s.Input.OrderID),
		"status": s.Status, "expiresAt": s.ExpiresAt.UTC().Format(time.RFC3339Nano), "replayed": res.Replayed,
	})
}

// demoErrorStatuses are the HTTP statuses of the shop backend's refusals;
// their codes are the API's (graph.ExtensionCode).
var demoErrorStatuses = map[string]int{
	payment.EINVALID:     http.StatusBadRequest,
	payment.EKEYREUSED:   http.StatusConflict,
	payment.EORDERPAID:   http.StatusConflict,
	payment.EUNAVAILABLE: http.StatusServiceUnavailable,
}

func writeDemoError(w http.ResponseWriter, err error) {
	code, msg := "INTERNAL_SERVER_ERROR", "internal server error"
	status, ok := demoErrorStatuses[payment.ErrorCode(err)]
	var e *payment.Error
	if ok && errors.As(err, &e) {
		code, msg = graph.ExtensionCode(err), e.Message
	} else {
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func optionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
