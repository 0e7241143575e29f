package app

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

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
// "description"?, "returnUrl"?, "captureMethod"?}: idempotent on cartId, as
// a shop's backend keys the session on its cart. A returnUrl (customer
// authentication) must be on the demo's own origin, this server's: where a
// merchant's server would name one of its registered origins. captureMethod
// MANUAL (the API's names) makes the session's charge only authorize: the
// shop captures when it ships the order (/demo/capture) or voids the
// authorization when the order is cancelled (/demo/void).
func (a *App) demoCheckoutSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CartID        string  `json:"cartId"`
		Amount        int64   `json:"amount"`
		Currency      string  `json:"currency"`
		OrderID       *string `json:"orderId"`
		Description   *string `json:"description"`
		ReturnURL     *string `json:"returnUrl"`
		CaptureMethod *string `json:"captureMethod"`
	}
	if !decodeDemoRequest(w, r, &req, `{"cartId", "amount", "currency", "orderId"?, "description"?, "returnUrl"?, "captureMethod"?}`) {
		return
	}
	key, err := demoKey("demo-cart:", "cartId", req.CartID)
	if err != nil {
		writeDemoError(w, err)
		return
	}
	in := payment.SessionInput{Amount: req.Amount, Currency: req.Currency}
	if req.CaptureMethod != nil {
		if in.CaptureMethod, err = demoCaptureMethod(*req.CaptureMethod); err != nil {
			writeDemoError(w, err)
			return
		}
	}
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
	captureMethod := "AUTOMATIC"
	if s.Input.CaptureMethod == payment.CaptureManual {
		captureMethod = "MANUAL"
	}
	writeDemoAnswer(w, map[string]any{
		"id": s.ID, "clientSecret": res.ClientSecret, "publishableKey": a.cfg.DemoPublishableKey,
		"amount": s.Input.Amount, "currency": s.Input.Currency, "orderId": optionalString(s.Input.OrderID),
		"captureMethod": captureMethod, "status": s.Status, "expiresAt": s.ExpiresAt.UTC().Format(time.RFC3339Nano), "replayed": res.Replayed,
	})
}

// demoCaptureMethod is the domain's capture method of the API's name for it.
func demoCaptureMethod(name string) (payment.CaptureMethod, error) {
	switch name {
	case "AUTOMATIC":
		return payment.CaptureAutomatic, nil
	case "MANUAL":
		return payment.CaptureManual, nil
	}
	return "", payment.Invalid("captureMethod", "captureMethod is AUTOMATIC or MANUAL")
}

// demoRefund is the shop backend's refund, in development only: what a
// merchant's server does when its back office refunds an order, with the
// demo merchant's secret key on the server side. POST /demo/refund
// {"refundId", "chargeId", "amount"?}: chargeId is Charge.id, and amount
// (minor units) defaults to what remains refundable. refundId is the
// page's idempotency key for one refund, minted once per click and sent
// with every retry of it, as the page's cart id is for its session: the
// same refundId answers the stored refund (replayed), never a second one.
// The answer is refundCharge's payload, as JSON.
func (a *App) demoRefund(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RefundID string `json:"refundId"`
		ChargeID string `json:"chargeId"`
		Amount   *int64 `json:"amount"`
	}
	if !decodeDemoRequest(w, r, &req, `{"refundId", "chargeId", "amount"?}`) {
		return
	}
	key, err := demoKey("demo-refund:", "refundId", req.RefundID)
	if err != nil {
		writeDemoError(w, err)
		return
	}
	in := payment.RefundInput{}
	if in.ChargeID, err = demoChargeID(req.ChargeID); err != nil {
		writeDemoError(w, err)
		return
	}
	if in.Amount, err = demoAmount(req.Amount, "refund what remains"); err != nil {
		writeDemoError(w, err)
		return
	}
	res, err := a.payments.RefundCharge(r.Context(), a.demo, key, in)
	if err != nil {
		writeDemoError(w, err)
		return
	}
	writeDemoAnswer(w, graph.RefundPayload(res))
}

// decodeDemoRequest reads r's JSON body (4 KiB at most, no unknown field)
// into v; otherwise it answers a refusal that shows shape, and reports
// false.
func decodeDemoRequest(w http.ResponseWriter, r *http.Request, v any, shape string) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeDemoError(w, payment.Invalid("", "send a JSON object: %s", shape))
		return false
	}
	return true
}

// demoKey is the idempotency key of the page's id for one act of the shop
// backend (a cart, a refund, a capture, a void), under prefix; an empty id
// gives an empty key, which the domain refuses.
func demoKey(prefix, field, id string) (string, error) {
	if len(id) > 100 {
		return "", payment.Invalid(field, "%s is at most 100 characters", field)
	}
	if id == "" {
		return "", nil
	}
	return prefix + id, nil
}

// demoChargeID is the charge a request names by Charge.id.
func demoChargeID(raw string) (uuid.UUID, error) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, payment.Invalid("chargeId", "chargeId is not a charge id: pass Charge.id, a UUID")
	}
	return id, nil
}

// demoAmount is the amount a request names, or 0 for none (the domain's
// "all of it": rest says what that is). Zero named is refused: a page that
// names an amount means that amount.
func demoAmount(amount *int64, rest string) (int64, error) {
	if amount == nil {
		return 0, nil
	}
	if *amount < payment.MinAmount {
		return 0, payment.Invalid("amount", "amount must be at least %d minor unit; leave it out to %s", payment.MinAmount, rest)
	}
	return *amount, nil
}

// writeDemoAnswer answers v, the shop backend's JSON, never cached.
func writeDemoAnswer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// ownPagesOnly admits a request to the demo's shop backend only as the
// demo's own page sends it: a JSON body (415 otherwise), and from this
// server's own origin (403 for an Origin of another host, or a request the
// browser marks cross-site). The backend spends the demo merchant's secret
// key, and a page of another site could otherwise make it refund by a
// simple form post (text/plain, form-encoded or multipart, which browsers
// send cross-site without asking). Nothing is read before both checks.
func ownPagesOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mediaType != "application/json" {
			writeDemoRefusal(w, http.StatusUnsupportedMediaType, "BAD_REQUEST", "send the request as Content-Type: application/json")
			return
		}
		if !fromOwnOrigin(r) {
			writeDemoRefusal(w, http.StatusForbidden, "FORBIDDEN", "the demo's shop backend serves only the demo's own pages, on this server's origin")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fromOwnOrigin reports whether r comes from a page of this server's own
// origin, or from no page at all (a program, which sends no Origin): an
// Origin header must name this host, and the browser must not have marked
// the request cross-site.
func fromOwnOrigin(r *http.Request) bool {
	if strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// writeDemoRefusal answers a request the shop backend refuses before
// reading it, in the backend's error form.
func writeDemoRefusal(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": message}})
}

// demoErrorStatuses are the HTTP statuses of the shop backend's refusals;
// their codes are the API's (graph.ExtensionCode).
var demoErrorStatuses = map[string]int{
	payment.EINVALID:        http.StatusBadRequest,
	payment.EKEYREUSED:      http.StatusConflict,
	payment.EORDERPAID:      http.StatusConflict,
	payment.EREFUNDEXCEEDS:  http.StatusConflict,
	payment.ECHARGENOTFOUND: http.StatusNotFound,
	payment.EUNAVAILABLE:    http.StatusServiceUnavailable,
	// A capture or void the charge no longer allows: the order is in another state.
	payment.ECAPTUREEXCEEDS: http.StatusConflict,
	payment.ENOTCAPTURABLE:  http.StatusConflict,
	payment.EVOIDED:         http.StatusConflict,
	payment.ECAPTURED:       http.StatusConflict,
	payment.EAUTHEXPIRED:    http.StatusConflict,
}

func writeDemoError(w http.ResponseWriter, err error) {
	refusal := map[string]any{"code": "INTERNAL_SERVER_ERROR", "message": "internal server error"}
	status, ok := demoErrorStatuses[payment.ErrorCode(err)]
	var e *payment.Error
	if ok && errors.As(err, &e) {
		refusal["code"], refusal["message"] = graph.ExtensionCode(err), e.Message
		// What remains, as the API's extensions say it: the page can tell a
		// charge refunded (or captured) in full from one that has some left.
		switch e.Code {
		case payment.EREFUNDEXCEEDS:
			refusal["refundable"] = e.Refundable
		case payment.ECAPTUREEXCEEDS:
			refusal["capturable"] = e.Capturable
		}
	} else {
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": refusal})
}

func optionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
