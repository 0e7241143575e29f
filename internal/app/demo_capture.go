package app

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"chargeonce/graph"
	"chargeonce/graph/model"
	"chargeonce/payment"
)

// demoCapture is the shop backend's "Ship order", in development only: what
// a merchant's server does when the order it authorized ships, with the
// demo merchant's secret key on the server side. POST /demo/capture
// {"captureId", "chargeId", "amount"?, "final"?}: captures amount (minor
// units; all that is capturable by default) of the charge's authorization,
// final (the rest released) unless final is false. captureId is the page's
// idempotency key for one capture, minted once per click and sent with
// every retry of it, as refundId is for a refund: the same captureId
// answers the stored capture (replayed), never a second one. The answer is
// captureCharge's payload, as JSON, with the charge as it is now.
func (a *App) demoCapture(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CaptureID string `json:"captureId"`
		ChargeID  string `json:"chargeId"`
		Amount    *int64 `json:"amount"`
		Final     *bool  `json:"final"`
	}
	if !decodeDemoRequest(w, r, &req, `{"captureId", "chargeId", "amount"?, "final"?}`) {
		return
	}
	key, err := demoKey("demo-capture:", "captureId", req.CaptureID)
	if err != nil {
		writeDemoError(w, err)
		return
	}
	in := payment.CaptureInput{Final: req.Final == nil || *req.Final}
	if in.ChargeID, err = demoChargeID(req.ChargeID); err != nil {
		writeDemoError(w, err)
		return
	}
	if in.Amount, err = demoAmount(req.Amount, "capture all that is capturable"); err != nil {
		writeDemoError(w, err)
		return
	}
	res, err := a.payments.CaptureCharge(r.Context(), a.demo, key, in)
	if err != nil {
		writeDemoError(w, err)
		return
	}
	p := a.demoAnswer(r.Context(), res, in.ChargeID)
	p.Capture = graph.ToCapture(res.Capture)
	writeDemoAnswer(w, p)
}

// demoVoid is the shop backend's "Cancel order", in development only: it
// voids the authorization of an order that will not ship, with the demo
// merchant's secret key on the server side. POST /demo/void {"voidId",
// "chargeId"}: voidId is the page's idempotency key for one void, as
// captureId is for a capture. A void and a capture of one charge race to
// one winner; the loser is refused (CHARGE_CAPTURED, CHARGE_VOIDED). The
// answer is voidCharge's payload, as JSON, with the charge as it is now.
func (a *App) demoVoid(w http.ResponseWriter, r *http.Request) {
	var req struct {
		VoidID   string `json:"voidId"`
		ChargeID string `json:"chargeId"`
	}
	if !decodeDemoRequest(w, r, &req, `{"voidId", "chargeId"}`) {
		return
	}
	key, err := demoKey("demo-void:", "voidId", req.VoidID)
	if err != nil {
		writeDemoError(w, err)
		return
	}
	var in payment.VoidInput
	if in.ChargeID, err = demoChargeID(req.ChargeID); err != nil {
		writeDemoError(w, err)
		return
	}
	res, err := a.payments.VoidCharge(r.Context(), a.demo, key, in)
	if err != nil {
		writeDemoError(w, err)
		return
	}
	p := a.demoAnswer(r.Context(), res, in.ChargeID)
	p.Void = graph.ToVoid(res.Void)
	writeDemoAnswer(w, p)
}

// demoAttemptPayload is captureCharge's or voidCharge's payload as the shop
// backend answers it: the API's fields, and the charge as it is now (the
// fields the checkout library's Charge has), which the page shows.
type demoAttemptPayload struct {
	IdempotencyKey string                `json:"idempotencyKey"`
	Status         payment.Status        `json:"status"`
	Replayed       bool                  `json:"replayed"`
	RetryAfterMs   *int                  `json:"retryAfterMs,omitempty"`
	ExpiresAt      *time.Time            `json:"expiresAt,omitempty"`
	Capture        *model.Capture        `json:"capture,omitempty"`
	Void           *model.Void           `json:"void,omitempty"`
	Failure        *model.CaptureFailure `json:"failure,omitempty"`
	Charge         *demoCharge           `json:"charge"`
}

// demoCharge is a charge with where it stands in its captures.
type demoCharge struct {
	ID                     string                `json:"id"`
	Amount                 int64                 `json:"amount"`
	Currency               string                `json:"currency"`
	OrderID                *string               `json:"orderId"`
	ProviderChargeID       string                `json:"providerChargeId"`
	CreatedAt              time.Time             `json:"createdAt"`
	CaptureStatus          payment.CaptureStatus `json:"captureStatus"`
	AmountCaptured         int64                 `json:"amountCaptured"`
	AmountCapturable       int64                 `json:"amountCapturable"`
	AuthorizationExpiresAt *time.Time            `json:"authorizationExpiresAt"`
}

// demoAnswer is what res says, with the charge id as it is now (null when
// it cannot be read: the answer stands without it).
func (a *App) demoAnswer(ctx context.Context, res payment.Result, id uuid.UUID) *demoAttemptPayload {
	p := &demoAttemptPayload{IdempotencyKey: res.IdempotencyKey, Status: res.Status, Replayed: res.Replayed, Charge: a.demoChargeNow(ctx, id)}
	p.RetryAfterMs, p.ExpiresAt = graph.Hints(res) // as the API says them
	if f := res.Failure; f != nil {
		p.Failure = &model.CaptureFailure{Code: f.Code, Message: f.Message}
	}
	return p
}

// demoChargeNow is the demo merchant's charge id as it is now; nil when it
// cannot be read.
func (a *App) demoChargeNow(ctx context.Context, id uuid.UUID) *demoCharge {
	c, err := a.payments.Charge(ctx, a.demo, id)
	if err != nil {
		return nil
	}
	st, err := a.payments.CaptureState(ctx, a.demo, id)
	if err != nil {
		return nil
	}
	out := &demoCharge{ID: c.ID.String(), Amount: c.Amount, Currency: c.Currency, OrderID: optionalString(c.OrderID),
		ProviderChargeID: c.ProviderChargeID, CreatedAt: c.CreatedAt.UTC(), CaptureStatus: st.Status,
		AmountCaptured: st.Captured, AmountCapturable: st.Capturable}
	if st.ExpiresAt != nil {
		t := st.ExpiresAt.UTC()
		out.AuthorizationExpiresAt = &t
	}
	return out
}
