package cardsim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

type handler struct {
	store        *store
	slowDelay    time.Duration
	refundSettle time.Duration
	publicURL    string // without a trailing slash; "" derives it from each request
	log          *slog.Logger
}

// NewHandler returns the simulator's HTTP API, with paths starting at /v1,
// and the 3-D Secure challenge pages that shoppers' browsers see, under
// /authenticate (chargeonce mounts it all under /provider with
// http.StripPrefix). The tables of the cardsim schema must exist (Migrate
// creates them).
func NewHandler(pool *pgxpool.Pool, cfg Config) http.Handler {
	h := &handler{
		store:        newStore(pool, cmp.Or(max(cfg.AuthorizationWindow, 0), AuthorizationWindowDefault)),
		slowDelay:    max(cfg.SlowDelay, 0),
		refundSettle: cfg.RefundSettle,
		publicURL:    strings.TrimRight(cfg.PublicURL, "/"),
		log:          cfg.Logger,
	}
	if h.refundSettle <= 0 {
		h.refundSettle = RefundSettleDefault
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", h.createCharge)
	mux.HandleFunc("GET /v1/charges", h.listCharges)
	mux.HandleFunc("GET /v1/charges/{id}", h.getCharge)
	mux.HandleFunc("POST /v1/charges/{id}/cancel", h.cancelCharge)
	mux.HandleFunc("POST /v1/refunds", h.createRefund)
	mux.HandleFunc("GET /v1/refunds", h.listRefunds)
	mux.HandleFunc("GET /v1/refunds/{id}", h.getRefund)
	mux.HandleFunc("POST /v1/captures", h.createCapture)
	mux.HandleFunc("GET /v1/captures", h.listCaptures)
	mux.HandleFunc("GET /v1/captures/{id}", h.getCapture)
	mux.HandleFunc("POST /v1/voids", h.createVoid)
	mux.HandleFunc("GET /v1/voids", h.listVoids)
	mux.HandleFunc("GET /v1/voids/{id}", h.getVoid)
	mux.HandleFunc("GET /authenticate/{id}", h.challenge)
	// The challenge's buttons change a charge, and the controls that fail a
	// refund or expire an authorization what they name: a page of another site must not be able to press them
	// for whoever's browser visits it.
	buttons := http.NewCrossOriginProtection()
	mux.Handle("POST /authenticate/{id}/complete", buttons.Handler(h.resolveChallenge("complete", h.store.completeAuthentication)))
	mux.Handle("POST /authenticate/{id}/fail", buttons.Handler(h.resolveChallenge("fail", h.store.failAuthentication)))
	mux.Handle("POST /v1/refunds/{id}/fail", buttons.Handler(http.HandlerFunc(h.failRefund)))
	mux.Handle("POST /v1/charges/{id}/expire", buttons.Handler(http.HandlerFunc(h.expireAuthorization)))
	// Catch-alls, less specific than the patterns above, so that every answer
	// is JSON: ServeMux's own 404 and 405 answers are plain text.
	mux.HandleFunc("/v1/charges", methodNotAllowed("GET, HEAD, POST"))
	mux.HandleFunc("/v1/charges/{id}", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("/v1/charges/{id}/cancel", methodNotAllowed("POST"))
	mux.HandleFunc("/v1/refunds", methodNotAllowed("GET, HEAD, POST"))
	mux.HandleFunc("/v1/refunds/{id}", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("/v1/refunds/{id}/fail", methodNotAllowed("POST"))
	mux.HandleFunc("/v1/charges/{id}/expire", methodNotAllowed("POST"))
	mux.HandleFunc("/v1/captures", methodNotAllowed("GET, HEAD, POST"))
	mux.HandleFunc("/v1/captures/{id}", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("/v1/voids", methodNotAllowed("GET, HEAD, POST"))
	mux.HandleFunc("/v1/voids/{id}", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("/authenticate/{id}", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("/authenticate/{id}/complete", methodNotAllowed("POST"))
	mux.HandleFunc("/authenticate/{id}/fail", methodNotAllowed("POST"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, apiError{
			Type: "invalid_request_error", Code: "resource_missing",
			Message: fmt.Sprintf("Unrecognized request URL (%s %s).", r.Method, r.URL.Path),
		})
	})
	return mux
}

// storeTimeout bounds the database work of one charge, which runs detached
// from the client's connection (see createCharge).
const storeTimeout = 15 * time.Second

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
		sleep(ctx, h.slowDelay)
	}

	c, replayed, err := h.store.create(ctx, key, req, spec)
	if errors.Is(err, errKeyReused) {
		writeError(w, http.StatusConflict, keyReusedError)
		return
	}
	if err != nil {
		h.log.Error("cardsim: store charge", "idempotency_key", key, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	h.log.Info("cardsim: charge", "id", c.ID, "status", c.Status,
		"payment_method", redactToken(c.PaymentMethod), "replayed", replayed)
	h.answerCharge(w, r, c, replayed)
}

// answerCharge answers a stored charge as it is now: a replay answers exactly
// as the first time (lost response included) unless the charge has since
// stopped waiting for the shopper, and then as it ended.
func (h *handler) answerCharge(w http.ResponseWriter, r *http.Request, c charge, replayed bool) {
	if c.PaymentMethod == tokenLostResponse {
		dropConnection(w)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if c.Status == statusFailed || c.Status == statusCanceled {
		writeError(w, http.StatusPaymentRequired, apiError{
			Type: "card_error", Code: deref(c.FailureCode), Message: deref(c.FailureMessage), Charge: c.ID,
		})
		return
	}
	writeJSON(w, http.StatusOK, toChargeObject(c, h.publicBase(r)))
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
	filter, reqErr := parseListQuery(r)
	if reqErr != nil {
		writeError(w, http.StatusBadRequest, *reqErr)
		return
	}
	charges, more, err := h.store.list(r.Context(), filter)
	if errors.Is(err, errNoCharge) {
		writeError(w, http.StatusBadRequest, noSuchStart("charge", *filter.StartingAfter))
		return
	}
	if err != nil {
		h.log.Error("cardsim: list charges", "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	list := listObject[chargeObject]{Object: "list", Data: make([]chargeObject, 0, len(charges)), HasMore: more}
	base := h.publicBase(r)
	for _, c := range charges {
		list.Data = append(list.Data, toChargeObject(c, base))
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *handler) getCharge(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, err := h.store.get(r.Context(), id)
	if errors.Is(err, errNoCharge) {
		writeError(w, http.StatusNotFound, invalidRequest("resource_missing", fmt.Sprintf("No such charge: %q.", id)))
		return
	}
	if err != nil {
		h.log.Error("cardsim: get charge", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	writeJSON(w, http.StatusOK, toChargeObject(c, h.publicBase(r)))
}

// cancelCharge stops a charge waiting for the shopper, as Stripe cancels a
// PaymentIntent: the caller gives up on an authentication that did not come.
// It races the challenge's buttons; the conditional update lets exactly one
// of them end the wait, and a cancel that lost is refused with the charge's
// status, for the caller to read how it ended.
func (h *handler) cancelCharge(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	reason, reqErr := decodeCancelRequest(w, r)
	if reqErr != nil {
		writeError(w, http.StatusBadRequest, *reqErr)
		return
	}
	c, canceled, err := h.store.cancel(r.Context(), id, reason)
	if errors.Is(err, errNoCharge) {
		writeError(w, http.StatusNotFound, invalidRequest("resource_missing", fmt.Sprintf("No such charge: %q.", id)))
		return
	}
	if err != nil {
		h.log.Error("cardsim: cancel charge", "id", id, "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}
	h.log.Info("cardsim: cancel", "id", c.ID, "status", c.Status, "canceled", canceled, "reason", reason)
	if !canceled {
		writeError(w, http.StatusBadRequest, apiError{
			Type: "invalid_request_error", Code: "charge_unexpected_state", Charge: c.ID,
			Message: fmt.Sprintf("This charge's status is %s: only a charge that is %s can be canceled.",
				c.Status, statusRequiresAction),
		})
		return
	}
	writeJSON(w, http.StatusOK, toChargeObject(c, h.publicBase(r)))
}

// publicBase is the simulator's address as the shopper's browser reaches it,
// without a trailing slash, under which the challenge pages are:
// Config.PublicURL when set, else the request's own scheme, host and mount
// prefix, right for a browser that reaches the simulator as its caller does.
func (h *handler) publicBase(r *http.Request) string {
	if h.publicURL != "" {
		return h.publicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + mountPrefix(r)
}

// mountPrefix is the path under which the handler is mounted: "/provider"
// under chargeonce, "" at a server's root. http.StripPrefix shortens
// r.URL.Path but leaves r.RequestURI as the client sent it, so the prefix is
// what the one has before the other.
func mountPrefix(r *http.Request) string {
	sent, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return ""
	}
	prefix, ok := strings.CutSuffix(sent.EscapedPath(), r.URL.EscapedPath())
	if !ok {
		return ""
	}
	return prefix
}

// noSuchStart refuses a list's starting_after that names no item of the
// list: a page after nothing is a caller's mistake, not the end of the list.
func noSuchStart(object, id string) apiError {
	return invalidRequest("resource_missing", fmt.Sprintf("starting_after: no such %s: %q.", object, id))
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, invalidRequest("method_not_allowed",
			fmt.Sprintf("Method %s is not allowed here; allowed: %s.", r.Method, allow)))
	}
}
