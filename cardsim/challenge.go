package cardsim

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// challengeURL is the address of charge id's challenge page under
// publicBase.
func challengeURL(publicBase, id string) string {
	return publicBase + "/authenticate/" + url.PathEscape(id)
}

// challengeView is what the challenge page draws.
type challengeView struct {
	ID          string
	Amount      string // "19.99 USD"
	Description string
	Waiting     bool
	// Ended says how a charge that no longer waits ended; ReturnURL, when it
	// has one, leads the shopper back.
	Ended     string
	ReturnURL string
}

// challengePage is the bank's 3-D Secure challenge, simulated: no script and
// nothing loaded from elsewhere, only two forms. Their actions are relative
// to the page (/authenticate/{id}), so they work under any mount prefix.
var challengePage = template.Must(template.New("challenge").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Authenticate your payment</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 28rem; margin: 3rem auto; padding: 0 1rem; color: #1a1a1a; }
.amount { font-size: 1.75rem; font-weight: 600; margin: 0.5rem 0 1.5rem; }
.note { color: #555; font-size: 0.9rem; }
form { display: inline; }
button { font-size: 1rem; padding: 0.6rem 1rem; margin: 0 0.5rem 0.5rem 0; border-radius: 0.4rem; border: 1px solid #888; cursor: pointer; }
button.complete { background: #1a7f37; border-color: #1a7f37; color: #fff; }
</style>
</head>
<body>
<h1>Authenticate your payment</h1>
<p class="note">This is the card simulator's 3-D Secure challenge, standing in for your bank's.</p>
<p class="amount">{{.Amount}}</p>
{{- if .Description}}
<p>{{.Description}}</p>
{{- end}}
{{- if .Waiting}}
<p>Confirm that you are making this payment.</p>
<form method="post" action="{{.ID}}/complete"><button type="submit" class="complete">Complete authentication</button></form>
<form method="post" action="{{.ID}}/fail"><button type="submit" class="fail">Fail authentication</button></form>
{{- else}}
<p>This payment no longer waits for authentication: {{.Ended}}</p>
{{- if .ReturnURL}}
<p><a href="{{.ReturnURL}}">Return to the shop</a></p>
{{- end}}
{{- end}}
</body>
</html>
`))

var notFoundPage = template.Must(template.New("not found").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>No such payment</title></head>
<body><h1>No such payment</h1><p>The card simulator has no payment {{printf "%q" .}} to authenticate.</p></body>
</html>
`))

var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Something went wrong</title></head>
<body><h1>Something went wrong</h1><p>The card simulator failed to process the request. Try again.</p></body>
</html>
`))

// challenge serves GET /authenticate/{id}: the challenge while the charge
// waits, and how it ended once it does not.
func (h *handler) challenge(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, err := h.store.get(r.Context(), id)
	if errors.Is(err, errNoCharge) {
		writePage(w, http.StatusNotFound, notFoundPage, id)
		return
	}
	if err != nil {
		h.log.Error("cardsim: challenge page", "id", id, "err", err)
		writePage(w, http.StatusInternalServerError, errorPage, nil)
		return
	}
	writePage(w, http.StatusOK, challengePage, newChallengeView(c))
}

// resolveChallenge serves a button of the challenge: resolve ends the
// charge's wait, and the shopper goes back to the charge's return_url
// whatever it did. A second press, a back button or a charge cancelled
// meanwhile changes nothing (resolve's update is conditional), and the
// shopper's page at the return_url reads how the charge ended.
func (h *handler) resolveChallenge(button string, resolve func(ctx context.Context, id string) (charge, bool, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		c, resolved, err := resolve(r.Context(), id)
		if errors.Is(err, errNoCharge) {
			writePage(w, http.StatusNotFound, notFoundPage, id)
			return
		}
		if err != nil {
			h.log.Error("cardsim: challenge "+button, "id", id, "err", err)
			writePage(w, http.StatusInternalServerError, errorPage, nil)
			return
		}
		h.log.Info("cardsim: challenge "+button, "id", c.ID, "status", c.Status, "resolved", resolved,
			"payment_method", redactToken(c.PaymentMethod))
		if c.ReturnURL == nil {
			// A charge that never waited (its request had no return_url): there
			// is nowhere to send the shopper, so the page says how it ended.
			writePage(w, http.StatusConflict, challengePage, newChallengeView(c))
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, *c.ReturnURL, http.StatusSeeOther)
	})
}

func newChallengeView(c charge) challengeView {
	v := challengeView{
		ID:          c.ID,
		Amount:      formatAmount(c.Amount, c.Currency),
		Description: deref(c.Description),
		Waiting:     c.Status == statusRequiresAction,
		ReturnURL:   deref(c.ReturnURL),
	}
	switch c.Status {
	case statusSucceeded:
		v.Ended = "it succeeded."
	case statusFailed:
		v.Ended = "it failed. " + deref(c.FailureMessage)
	case statusCanceled:
		v.Ended = "it was cancelled. " + deref(c.FailureMessage)
	}
	return v
}

// writePage renders a page whole before answering, so that a template error
// cannot leave half a page behind a 200.
func writePage(w http.ResponseWriter, status int, page *template.Template, data any) {
	var body bytes.Buffer
	if err := page.Execute(&body, data); err != nil {
		// Our own templates, on our own plain values: this cannot happen.
		panic("cardsim: render page: " + err.Error())
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// The page changes with the charge, and loads nothing from anywhere.
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(body.Bytes())
}

// minorUnitsOtherThanTwo lists the currencies whose minor unit is not a
// hundredth (ISO 4217): none for JPY, a thousandth for KWD. Any other code,
// known or not, is shown with two decimals. chargeonce keeps the whole table
// in package payment, which the simulator cannot import: payment's own tests
// mount the simulator.
var minorUnitsOtherThanTwo = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0,
	"PYG": 0, "RWF": 0, "UGX": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
}

// formatAmount shows amount, in minor units of currency, to the shopper:
// 1999 USD is "19.99 USD", 500 JPY is "500 JPY", 1234 KWD is "1.234 KWD".
func formatAmount(amount int64, currency string) string {
	digits, ok := minorUnitsOtherThanTwo[currency]
	if !ok {
		digits = 2
	}
	s := strconv.FormatInt(amount, 10) // amounts are positive (at most maxAmount)
	if digits > 0 {
		if len(s) <= digits {
			s = strings.Repeat("0", digits-len(s)+1) + s
		}
		s = s[:len(s)-digits] + "." + s[len(s)-digits:]
	}
	return s + " " + currency
}
