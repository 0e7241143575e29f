package payment

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
)

// A checkout session is what the merchant's server fixes to be paid (an
// amount, a currency, an order), created with a secret key; a checkout page
// pays it with a publishable key and the session's client secret, the
// capability for exactly that payment. A session is paid at most once,
// takes at most Config.SessionMaxAttempts attempts, and takes none after it
// expires.

// SessionStatus is where a checkout session stands.
type SessionStatus string

const (
	SessionOpen    SessionStatus = "OPEN"
	SessionPaid    SessionStatus = "PAID"
	SessionExpired SessionStatus = "EXPIRED"
)

// Limits of a checkout session, part of the API contract.
const (
	SessionExpiresInDefault = time.Hour
	SessionExpiresInMax     = 24 * time.Hour
	MaxReturnURLLength      = 2048
)

// SessionInput is what the merchant's server asks a session to fix. Empty
// strings mean "not given"; a zero ExpiresIn takes SessionExpiresInDefault.
type SessionInput struct {
	Amount      int64
	Currency    string
	OrderID     string
	Description string
	ReturnURL   string
	ExpiresIn   time.Duration
	// CaptureMethod is CaptureManual for a session whose charge only
	// authorizes; empty or CaptureAutomatic takes the money at once.
	CaptureMethod CaptureMethod
}

// CheckoutSession is a stored session.
type CheckoutSession struct {
	ID             uuid.UUID
	MerchantID     uuid.UUID
	IdempotencyKey string
	Input          SessionInput
	// Status is as stored, except that an open session past its expiry is
	// EXPIRED (the sweep has not marked it yet).
	Status      SessionStatus
	Attempts    int
	MaxAttempts int
	CreatedAt   time.Time
	ExpiresAt   time.Time
	Charge      *Charge // set when PAID

	fingerprint []byte
	secretHash  []byte
	chargeID    *uuid.UUID
}

// SessionResult answers createCheckoutSession.
type SessionResult struct {
	IdempotencyKey string
	Replayed       bool
	Session        CheckoutSession
	// ClientSecret is the session's capability; empty on a replay made with
	// another secret key than the one that created the session, which
	// cannot be shown it (only its hash is stored).
	ClientSecret string
}

// KeyScope says among whose keys a request's idempotency key is.
type KeyScope int

const (
	// MerchantKeys are the merchant's own keys: what its server sends with
	// a secret key, a session charge's included.
	MerchantKeys KeyScope = iota
	// SessionKeys are the keys of the session a request names: what a
	// checkout page sends with a publishable key. A page can neither take
	// a key of the merchant's, nor learn which ones it used.
	SessionKeys
)

// SessionCharge is a charge request on a session: the card, and whatever of
// the session's terms the page sent too (nil: not sent), which must then
// equal the session's.
type SessionCharge struct {
	PaymentMethod string
	Amount        *int64
	Currency      *string
	OrderID       *string
	Description   *string
	ReturnURL     *string
	CaptureMethod *CaptureMethod
}

// Errors of sessions; each means nothing was claimed and nothing charged.
var (
	errSessionUnknown = &Error{Code: ENOTFOUND, Field: "input.checkoutSession",
		Message: "no open checkout session of this merchant has this client secret; nothing was charged. Pass the clientSecret that createCheckoutSession returned"}
	errSessionPaid = &Error{Code: ESESSIONPAID, Field: "input.checkoutSession",
		Message: "this checkout session is already paid, or being paid, under another idempotency key; nothing was charged"}
	errSessionExpired = &Error{Code: ESESSIONEXPIRED, Field: "input.checkoutSession",
		Message: "this checkout session has expired; nothing was charged. The merchant's server must create a new one"}
	errOrderHasSession = &Error{Code: EORDERPAID, Field: "input.orderId",
		Message: "this order is already paid, or has an open checkout session; no second session was created. Pay the open one, or create one after it expires"}
	errSessionLocked = &Error{Code: ESESSIONLOCKED, Field: "input.checkoutSession",
		Message: "this checkout session has taken its maximum of charge attempts; nothing was charged. The merchant's server must create a new one"}
)

// CreateCheckoutSession creates a session of m for in, once per key: a retry
// returns the stored session (Replayed), and the key with another input is
// EKEYREUSED. An order that is paid, or has an open session, is EORDERPAID.
// seed is the presenting secret key's own secret material (graph derives it
// from the key): the client secret is derived from it and the session's
// id, so the creating answer and its replay can show it while only its hash
// is stored.
func (s *Service) CreateCheckoutSession(ctx context.Context, m Merchant, seed []byte, key string, in SessionInput) (SessionResult, error) {
	if err := validateCallerKey(key); err != nil {
		return SessionResult{}, err
	}
	if in.ExpiresIn == 0 {
		in.ExpiresIn = SessionExpiresInDefault
	}
	if err := in.Validate(); err != nil {
		return SessionResult{}, err
	}
	if err := s.httpsInProduction("input.returnUrl", in.ReturnURL); err != nil {
		return SessionResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	fingerprint := sessionFingerprint(in)
	for range 2 {
		stored, err := s.store.sessionByKey(ctx, m.ID, key)
		if err == nil {
			return s.replaySession(ctx, stored, seed, key, fingerprint)
		}
		if !errors.Is(err, errNotFound) {
			return SessionResult{}, err
		}
		now := s.cfg.Now()
		sess := CheckoutSession{
			ID: newID(), MerchantID: m.ID, IdempotencyKey: key, Input: in, Status: SessionOpen,
			CreatedAt: now, ExpiresAt: now.Add(in.ExpiresIn), fingerprint: fingerprint,
		}
		secret := clientSecret(seed, sess.ID)
		sess.secretHash = hashSecret(secret)
		created, inserted, err := s.store.createSession(ctx, sess, now)
		if err != nil {
			if ErrorCode(err) == EORDERPAID {
				s.metrics.OrderPaid.Inc()
				return SessionResult{}, errOrderHasSession
			}
			return SessionResult{}, err
		}
		if inserted {
			s.metrics.CheckoutSessions.Inc()
			created.MaxAttempts = s.cfg.SessionMaxAttempts
			s.log.InfoContext(ctx, "checkout session created", "merchant", m.Name, "session_id", created.ID,
				"amount", in.Amount, "currency", in.Currency, "expires_at", created.ExpiresAt)
			return SessionResult{IdempotencyKey: key, Session: created, ClientSecret: secret}, nil
		}
		// Nothing inserted: the key was taken a moment ago (read it again),
		// or the order is paid.
		if in.OrderID != "" {
			paid, err := s.store.orderIsPaid(ctx, m.ID, in.OrderID)
			if err != nil {
				return SessionResult{}, err
			}
			if paid {
				s.metrics.OrderPaid.Inc()
				return SessionResult{}, errOrderHasSession
			}
		}
	}
	return SessionResult{}, errors.New("checkout session neither created nor found")
}

// replaySession answers a create whose key is taken by stored.
func (s *Service) replaySession(ctx context.Context, stored CheckoutSession, seed []byte, key string, fingerprint []byte) (SessionResult, error) {
	if !hmac.Equal(stored.fingerprint, fingerprint) {
		s.metrics.KeyReused.Inc()
		return SessionResult{}, &Error{Code: EKEYREUSED, Field: "idempotencyKey",
			Message: "this idempotency key was already used to create a checkout session with a different input; use a new key for a new session"}
	}
	presented, err := s.present(ctx, stored)
	if err != nil {
		return SessionResult{}, err
	}
	res := SessionResult{IdempotencyKey: key, Replayed: true, Session: presented}
	if secret := clientSecret(seed, stored.ID); subtle.ConstantTimeCompare(hashSecret(secret), stored.secretHash) == 1 {
		res.ClientSecret = secret
	}
	return res, nil
}

// CheckoutSession returns m's session id, nil when m has none.
func (s *Service) CheckoutSession(ctx context.Context, m Merchant, id uuid.UUID) (*CheckoutSession, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	sess, err := s.store.session(ctx, m.ID, id)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if sess, err = s.present(ctx, sess); err != nil {
		return nil, err
	}
	return &sess, nil
}

// present completes a stored session for an answer: its limit, and EXPIRED
// once past its expiry, unless an attempt still running (a slow provider, a
// shopper authenticating) may yet pay it: the sweep leaves such a session
// OPEN until that attempt ends, and so does the answer.
func (s *Service) present(ctx context.Context, sess CheckoutSession) (CheckoutSession, error) {
	sess.MaxAttempts = s.cfg.SessionMaxAttempts
	if sess.Status != SessionOpen || s.cfg.Now().Before(sess.ExpiresAt) {
		return sess, nil
	}
	live, err := s.store.sessionHasLiveAttempt(ctx, sess.ID)
	if err != nil {
		return sess, err
	}
	if !live {
		sess.Status = SessionExpired
	}
	return sess, nil
}

// ChargeCheckoutSession pays m's session that clientSecret names, under
// key: as ChargeCard, with the session's amount, currency, order and
// description. Terms the page sent too must equal the session's (EINVALID,
// naming the field), so a page cannot change what is paid. A new key on a
// session that is paid or being paid is ESESSIONPAID, on an expired one
// ESESSIONEXPIRED, on one that has taken its attempts ESESSIONLOCKED; a
// retry of a key is answered from its attempt whatever the session's state.
// The key is among scope's keys: a page's keys are the session's own.
func (s *Service) ChargeCheckoutSession(ctx context.Context, m Merchant, scope KeyScope, key, secret string, in SessionCharge) (Result, error) {
	if err := validateCallerKey(key); err != nil {
		return Result{}, err
	}
	sess, err := s.sessionBySecret(ctx, m, secret)
	if err != nil {
		return Result{}, err
	}
	if err := in.agrees(sess.Input); err != nil {
		return Result{}, err
	}
	return s.charge(ctx, m, scope.of(sess), key, ChargeInput{
		Amount: sess.Input.Amount, Currency: sess.Input.Currency, PaymentMethod: in.PaymentMethod,
		OrderID: sess.Input.OrderID, Description: sess.Input.Description, CheckoutSessionID: sess.ID,
		ReturnURL: sess.Input.ReturnURL, CaptureMethod: sess.Input.CaptureMethod,
	})
}

// of is the session whose keys scope's are, for sess: uuid.Nil for the
// merchant's own.
func (scope KeyScope) of(sess CheckoutSession) uuid.UUID {
	if scope == SessionKeys {
		return sess.ID
	}
	return uuid.Nil
}

// ChargeStatusInSession is ChargeStatus for the attempts of the session
// that secret names only: any other key is nil, as one never used. A page
// (SessionKeys) reads the keys it sent on the session; the merchant
// (MerchantKeys) reads those too, then its own keys' attempts on the
// session.
func (s *Service) ChargeStatusInSession(ctx context.Context, m Merchant, scope KeyScope, key, secret string) (*Result, error) {
	sess, err := s.sessionBySecret(ctx, m, secret)
	if err != nil {
		return nil, err
	}
	among := []uuid.UUID{sess.ID}
	if scope == MerchantKeys {
		among = append(among, uuid.Nil)
	}
	for _, keySession := range among {
		a, ok, err := s.attempt(ctx, m, keySession, key)
		if err != nil {
			return nil, err
		}
		if ok && a.Kind == KindCharge && a.charge().Input.CheckoutSessionID == sess.ID {
			return s.status(ctx, m, a), nil
		}
	}
	return nil, nil
}

// sessionBySecret is m's session whose client secret is secret, compared by
// hash in constant time; errSessionUnknown for any other secret.
func (s *Service) sessionBySecret(ctx context.Context, m Merchant, secret string) (CheckoutSession, error) {
	id, ok := parseClientSecret(secret)
	if !ok {
		return CheckoutSession{}, errSessionUnknown
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	sess, err := s.store.session(ctx, m.ID, id)
	if errors.Is(err, errNotFound) {
		return CheckoutSession{}, errSessionUnknown
	}
	if err != nil {
		return CheckoutSession{}, err
	}
	if subtle.ConstantTimeCompare(hashSecret(secret), sess.secretHash) != 1 {
		return CheckoutSession{}, errSessionUnknown
	}
	return sess, nil
}

// sessionRefusal says why a session took no new attempt, when the claim
// inserted nothing and found no attempt under the key; nil when the session
// would take one (its order may be paid, or the key was just freed).
func (s *Service) sessionRefusal(ctx context.Context, m Merchant, id uuid.UUID) error {
	sess, err := s.store.session(ctx, m.ID, id)
	if err != nil {
		return err
	}
	var refusal error
	reason := ""
	switch {
	case sess.Status == SessionPaid:
		refusal, reason = errSessionPaid, "paid"
	case sess.Status == SessionExpired || !s.cfg.Now().Before(sess.ExpiresAt):
		refusal, reason = errSessionExpired, "expired"
	case sess.Attempts >= s.cfg.SessionMaxAttempts:
		refusal, reason = errSessionLocked, "locked"
	}
	if refusal != nil {
		s.metrics.SessionRefused.WithLabelValues(reason).Inc()
	}
	return refusal
}

// sessionPaidOrOrder tells a second live attempt on a session from one on
// its order, when the claim's insert broke a unique index: both refuse
// it, and the session's reason is the one to give when it is this session
// that is paid or being paid.
func (s *Service) sessionPaidOrOrder(ctx context.Context, id uuid.UUID, err error) error {
	live, lerr := s.store.sessionHasLiveAttempt(ctx, id)
	if lerr == nil && live {
		s.metrics.SessionRefused.WithLabelValues("paid").Inc()
		return errSessionPaid
	}
	if ErrorCode(err) == EORDERPAID {
		s.metrics.OrderPaid.Inc()
	}
	return err
}

// ExpireSessions marks up to limit open sessions past their expiry, with no
// attempt running, EXPIRED, each with its checkout_session.expired event.
func (s *Service) ExpireSessions(ctx context.Context, limit int) (int, error) {
	return s.store.expireSessions(ctx, s.cfg.Now(), uuid.Nil, "", limit)
}

// Validate checks a session's input against the API's limits.
func (in SessionInput) Validate() error {
	if err := validateMoney(in.Amount, in.Currency); err != nil {
		return err
	}
	if err := checkText("input.orderId", in.OrderID, MaxOrderIDLength); err != nil {
		return err
	}
	if err := checkText("input.description", in.Description, MaxDescriptionLength); err != nil {
		return err
	}
	if err := ValidateReturnURL("input.returnUrl", in.ReturnURL); err != nil {
		return err
	}
	if err := validateCaptureMethod("input.captureMethod", in.CaptureMethod); err != nil {
		return err
	}
	if in.ExpiresIn < time.Second || in.ExpiresIn > SessionExpiresInMax || in.ExpiresIn%time.Second != 0 {
		return Invalid("input.expiresInSeconds", "expiresInSeconds must be between 1 and %d; got %v", int(SessionExpiresInMax/time.Second), in.ExpiresIn.Seconds())
	}
	return nil
}

// agrees checks the terms a page sent with a session charge against the
// session's own.
func (in SessionCharge) agrees(terms SessionInput) error {
	differs := func(field string) error {
		return Invalid("input."+field, "input.%s differs from the checkout session's; nothing was charged. Send only paymentMethod and checkoutSession: the session fixes what is paid", field)
	}
	switch {
	case in.Amount != nil && *in.Amount != terms.Amount:
		return differs("amount")
	case in.Currency != nil && *in.Currency != terms.Currency:
		return differs("currency")
	case in.OrderID != nil && *in.OrderID != terms.OrderID:
		return differs("orderId")
	case in.Description != nil && *in.Description != terms.Description:
		return differs("description")
	case in.ReturnURL != nil && *in.ReturnURL != terms.ReturnURL:
		return differs("returnUrl")
	case in.CaptureMethod != nil && manual(*in.CaptureMethod) != manual(terms.CaptureMethod):
		return differs("captureMethod")
	}
	return nil
}

// sessionFingerprint identifies a session's input, as Fingerprint a charge's.
func sessionFingerprint(in SessionInput) []byte {
	b, err := json.Marshal(struct {
		Version     int    `json:"v"`
		Amount      int64  `json:"amount"`
		Currency    []byte `json:"currency"`
		OrderID     []byte `json:"orderId"`
		Description []byte `json:"description"`
		ReturnURL   []byte `json:"returnUrl"`
		ExpiresIn   int64  `json:"expiresInSeconds"`
		Capture     string `json:"captureMethod,omitempty"`
	}{1, in.Amount, []byte(in.Currency), []byte(in.OrderID), []byte(in.Description), []byte(in.ReturnURL), int64(in.ExpiresIn / time.Second),
		manual(in.CaptureMethod)})
	if err != nil {
		panic(err) // bytes and ints always encode
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// clientSecretMark starts every client secret, so that a leaked one is
// recognizable; the session's id follows it in hex, then the secret part.
const (
	clientSecretMark      = "cs_"
	clientSecretSeparator = "_secret_"
)

// clientSecret is the client secret of session id created with seed:
// cs_<id>_secret_<HMAC-SHA256(seed, id)>, 256 bits that only the holder of
// the creating key can compute.
func clientSecret(seed []byte, id uuid.UUID) string {
	mac := hmac.New(sha256.New, seed)
	mac.Write([]byte("chargeonce checkout session client secret\x00"))
	mac.Write(id[:])
	return clientSecretMark + hex.EncodeToString(id[:]) + clientSecretSeparator + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// SessionOf is the checkout session a client secret names, by its form
// alone (uuid.Nil for what is not one): the scope of a page's keys, once
// the secret has been checked (ChargeStatusInSession).
func SessionOf(secret string) uuid.UUID {
	id, _ := parseClientSecret(secret)
	return id
}

// parseClientSecret reads the session id of a client secret's form.
func parseClientSecret(secret string) (uuid.UUID, bool) {
	rest, ok := strings.CutPrefix(secret, clientSecretMark)
	if !ok || len(rest) != 32+len(clientSecretSeparator)+43 || rest[32:32+len(clientSecretSeparator)] != clientSecretSeparator {
		return uuid.Nil, false
	}
	var id uuid.UUID
	if _, err := hex.Decode(id[:], []byte(rest[:32])); err != nil {
		return uuid.Nil, false
	}
	return id, true
}

// hashSecret is how a client secret is stored: 256 bits of HMAC output
// need no slow hash.
func hashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}
