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
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeDemoError(w, payment.Invalid("", "send a JSON object: {\"refundId\", \"chargeId\", \"amount\"?}"))
		return
	}
	if len(req.RefundID) > 100 {
		writeDemoError(w, payment.Invalid("refundId", "refundId is at most 100 characters"))
		return
	}
	key := "demo-refund:" + req.RefundID
	if req.RefundID == "" {
		key = "" // refused as an empty key
	}
	chargeID, err := uuid.Parse(req.ChargeID)
	if err != nil {
		writeDemoError(w, payment.Invalid("chargeId", "chargeId is not a charge id: pass Charge.id, a UUID"))
		return
	}
	in := payment.RefundInput{ChargeID: chargeID}
	if req.Amount != nil {
		// Zero would mean "what remains" to the domain: a page that names an amount means that amount.
		if *req.Amount < payment.MinAmount {
			writeDemoError(w, payment.Invalid("amount", "amount must be at least %d minor unit; leave it out to refund what remains", payment.MinAmount))
			return
		}
		in.Amount = *req.Amount
	}
	res, err := a.payments.RefundCharge(r.Context(), a.demo, key, in)
	if err != nil {
		writeDemoError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(graph.RefundPayload(res))
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
}

func writeDemoError(w http.ResponseWriter, err error) {
	refusal := map[string]any{"code": "INTERNAL_SERVER_ERROR", "message": "internal server error"}
	status, ok := demoErrorStatuses[payment.ErrorCode(err)]
	var e *payment.Error
	if ok && errors.As(err, &e) {
		refusal["code"], refusal["message"] = graph.ExtensionCode(err), e.Message
		if e.Code == payment.EREFUNDEXCEEDS {
			// What remains, as the API's extensions.refundable: the page can tell a
			// charge refunded in full from one that has some left.
			refusal["refundable"] = e.Refundable
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
