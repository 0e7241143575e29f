package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"chargeonce/request"
)

// Event types: what a finalization, or a checkout session's end, announces.
// The outbox row, the NATS subject (SubjectPrefix + type) and the webhook
// body all carry one of them.
const (
	EventChargeSucceeded = "charge.succeeded"
	EventChargeFailed    = "charge.failed"
	// EventChargeRequiresAction: an attempt waits for the shopper to
	// authenticate (3-D Secure), so a merchant may remind them; its
	// charge.succeeded or charge.failed follows.
	EventChargeRequiresAction = "charge.requires_action"
	// EventSessionPaid: a charge paid a checkout session (written with the
	// charge's own charge.succeeded, in the same transaction).
	EventSessionPaid = "checkout_session.paid"
	// EventSessionExpired: a checkout session expired unpaid.
	EventSessionExpired = "checkout_session.expired"
	// EventRefundSucceeded: money went back. EventRefundFailed: a refund
	// did not happen, or one that succeeded failed later (the card was
	// closed; the refund's id is then the one of its refund.succeeded).
	EventRefundSucceeded = "refund.succeeded"
	EventRefundFailed    = "refund.failed"
	// EventChargeLateRefunded: a charge completed at the provider after
	// its attempt failed as provider_unavailable, and is being refunded
	// (its refund's own refund.succeeded follows); the attempt stays
	// FAILED. It carries the attempt's failure and the late charge.
	EventChargeLateRefunded = "charge.late_refunded"
	// EventChargeDuplicateRefunded: the provider holds a second successful
	// charge for one attempt, which is being refunded (its refund's own
	// refund.succeeded follows); the attempt's answer stands. It carries
	// the duplicate charge.
	EventChargeDuplicateRefunded = "charge.duplicate_refunded"
	// EventCardTestingSuspected: the declines of one of the merchant's
	// publishable keys ran over their allowance, which is what card testing
	// through its checkout looks like. It names no attempt; CardTesting
	// says which key and until when.
	EventCardTestingSuspected = "merchant.card_testing_suspected"
	// EventChargeAuthorized: a charge made with captureMethod MANUAL
	// succeeded (its charge.succeeded comes with it): the money is held
	// until Authorization.ExpiresAt, for captures or a void.
	EventChargeAuthorized = "charge.authorized"
	// EventChargeCaptured: a capture took money of an authorization
	// (Capture says how much, and whether it was final).
	EventChargeCaptured = "charge.captured"
	// EventChargeVoided: an authorization was voided; nothing was taken.
	EventChargeVoided = "charge.voided"
	// EventAuthorizationExpiring: an open authorization lapses at
	// Authorization.ExpiresAt, within AUTHORIZATION_EXPIRY_WARNING: capture
	// or void it before then.
	EventAuthorizationExpiring = "charge.authorization_expiring"
	// EventAuthorizationExpired: an authorization lapsed; what was not
	// captured was released.
	EventAuthorizationExpired = "charge.authorization_expired"
	// EventChargeLateVoided: an authorization (captureMethod MANUAL)
	// completed at the provider after its attempt failed as
	// provider_unavailable, and is being voided (its charge.voided
	// follows); the attempt stays FAILED.
	EventChargeLateVoided = "charge.late_voided"
)

// EventTypes are every event type, in the order of their subjects.
var EventTypes = []string{EventChargeSucceeded, EventChargeFailed, EventSessionPaid, EventSessionExpired, EventChargeRequiresAction,
	EventRefundSucceeded, EventRefundFailed, EventChargeLateRefunded, EventChargeDuplicateRefunded, EventCardTestingSuspected,
	EventChargeAuthorized, EventChargeCaptured, EventChargeVoided, EventAuthorizationExpiring, EventAuthorizationExpired,
	EventChargeLateVoided}

// SubjectPrefix starts the NATS subject of every event:
// chargeonce.charge.succeeded and chargeonce.charge.failed.
const SubjectPrefix = "chargeonce."

// Event is what chargeonce publishes when an attempt becomes final, or a
// checkout session is paid or expires, written to the outbox in the
// transaction that makes the change. Its JSON form is the message body on
// NATS and the body of a merchant's webhook. ID is unique per event:
// consumers deduplicate on it.
type Event struct {
	ID         uuid.UUID `json:"id"`
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurredAt"`
	MerchantID uuid.UUID `json:"merchantId"`
	// IdempotencyKey and AttemptID are the attempt's: of the charge events,
	// and of checkout_session.paid (the attempt that paid); empty and
	// absent in checkout_session.expired.
	IdempotencyKey string `json:"idempotencyKey"`
	// KeySession is the checkout session among whose keys IdempotencyKey
	// is (uuid.Nil: the merchant's own), for this instance's and the
	// others' live status, which follow an attempt by its key in its
	// scope; consumers name the session by CheckoutSession.
	KeySession      uuid.UUID     `json:"-"`
	AttemptID       *uuid.UUID    `json:"attemptId,omitempty"`
	Amount          int64         `json:"amount"` // in the currency's minor units
	Currency        string        `json:"currency"`
	OrderID         string        `json:"orderId,omitempty"`
	Charge          *EventCharge  `json:"charge,omitempty"`  // charge.succeeded, checkout_session.paid
	Failure         *EventFailure `json:"failure,omitempty"` // charge.failed
	CheckoutSession *EventSession `json:"checkoutSession,omitempty"`
	NextAction      *EventAction  `json:"nextAction,omitempty"` // charge.requires_action
	// Refund is the refund of a refund event (its ChargeID the charge
	// refunded); absent from a refund.failed whose refund never happened.
	Refund *EventRefund `json:"refund,omitempty"`
	// RefundOf is the charge a refund event's attempt refunds.
	RefundOf *uuid.UUID `json:"refundOf,omitempty"`
	// CardTesting is what a merchant.card_testing_suspected concerns.
	CardTesting *EventCardTesting `json:"cardTesting,omitempty"`
	// Authorization is the authorization of charge.authorized,
	// charge.authorization_expiring and charge.authorization_expired (the
	// charge is ChargeID's).
	Authorization *EventAuthorization `json:"authorization,omitempty"`
	// Capture is charge.captured's; Void is charge.voided's.
	Capture *EventCapture `json:"capture,omitempty"`
	Void    *EventVoid    `json:"void,omitempty"`
	// Request is the request that caused the event, as Stripe's events
	// name theirs: its id (X-Request-Id), null when no request did (the
	// reconciler, a sweep), and the idempotency key it was sent with, null
	// for an event of no attempt.
	Request *EventRequest `json:"request,omitempty"`
}

// storedBody is e's JSON as its outbox row's body holds it: without what
// the row's columns hold (its id, type, merchant and key, and its attempt
// where the row names one, attemptInRow), which charge_event_body puts
// back into the body the relay publishes. Each field below hides e's of
// the same JSON name (a shallower field wins) and, nil, is left out.
//
// With chargeInRow (a charge.succeeded whose row names its charge), the
// body leaves out what the charge row holds too: when it occurred (the
// charge's time), the amount, currency and order, the charge, and the
// request's key (the row's key). Its request keeps only its id, and not
// even that where the row's request_id holds it (requestUUID).
func (e Event) storedBody(attemptInRow, chargeInRow bool) ([]byte, error) {
	stored := struct {
		Event
		ID             *struct{}    `json:"id,omitempty"`
		Type           *struct{}    `json:"type,omitempty"`
		MerchantID     *struct{}    `json:"merchantId,omitempty"`
		IdempotencyKey *struct{}    `json:"idempotencyKey,omitempty"`
		AttemptID      *uuid.UUID   `json:"attemptId,omitempty"`
		OccurredAt     any          `json:"occurredAt,omitempty"`
		Amount         any          `json:"amount,omitempty"`
		Currency       any          `json:"currency,omitempty"`
		OrderID        string       `json:"orderId,omitempty"`
		Charge         *EventCharge `json:"charge,omitempty"`
		Request        any          `json:"request,omitempty"`
	}{Event: e}
	if !attemptInRow {
		stored.AttemptID = e.AttemptID
	}
	if !chargeInRow {
		stored.OccurredAt, stored.Amount, stored.Currency, stored.OrderID, stored.Charge = e.OccurredAt, e.Amount, e.Currency, e.OrderID, e.Charge
		if e.Request != nil { // a nil pointer in an any would be written as null, not left out
			stored.Request = e.Request
		}
		return json.Marshal(stored)
	}
	if e.Charge == nil || e.Request == nil || e.Request.IdempotencyKey == nil || *e.Request.IdempotencyKey != e.IdempotencyKey {
		return nil, fmt.Errorf("payment: event %s (%s) cannot take its charge from its row", e.ID, e.Type)
	}
	if _, inRow := e.requestUUID(); !inRow {
		stored.Request = struct {
			ID *string `json:"id"`
		}{e.Request.ID}
	}
	return json.Marshal(stored)
}

// requestUUID is the id of e's request as the request_id of a
// charge.succeeded's row keeps it, when it is a UUID (request.UUID):
// charge_event_body puts it back as the body's request.id.
func (e Event) requestUUID() (uuid.UUID, bool) {
	if e.Request == nil || e.Request.ID == nil {
		return uuid.Nil, false
	}
	return request.UUID(*e.Request.ID)
}

// EventRequest is the request an event names; its fields are spelled
// request.id and request.idempotency_key, as the events of the payment
// APIs merchants know spell them.
type EventRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

// causedBy is e naming the request of ctx, if any, and its attempt's key.
func (e Event) causedBy(ctx context.Context) Event {
	var r EventRequest
	if id := request.ID(ctx); id != "" {
		r.ID = &id
	}
	if e.AttemptID != nil && e.IdempotencyKey != "" {
		key := e.IdempotencyKey
		r.IdempotencyKey = &key
	}
	e.Request = &r
	return e
}

// EventAuthorization is an authorization an event concerns: of the charge
// ChargeID, Amount authorized, Captured of it so far, lapsing at ExpiresAt.
type EventAuthorization struct {
	ChargeID  uuid.UUID `json:"chargeId"`
	Amount    int64     `json:"amount"`
	Captured  int64     `json:"captured"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// EventCapture is the capture a charge.captured announces.
type EventCapture struct {
	ID        uuid.UUID `json:"id"`
	ChargeID  uuid.UUID `json:"chargeId"`
	Amount    int64     `json:"amount"`
	Final     bool      `json:"final"`
	CreatedAt time.Time `json:"createdAt"`
}

// EventVoid is the void a charge.voided announces.
type EventVoid struct {
	ID        uuid.UUID `json:"id"`
	ChargeID  uuid.UUID `json:"chargeId"`
	CreatedAt time.Time `json:"createdAt"`
}

// EventCardTesting is the suspicion a merchant.card_testing_suspected
// announces: card testing through the publishable key KeyID, suspected
// until Until (each decline costs its client address double meanwhile).
type EventCardTesting struct {
	KeyID uuid.UUID `json:"publishableKeyId"`
	Until time.Time `json:"until"`
}

// EventRefund is the refund a refund event announces.
type EventRefund struct {
	ID               uuid.UUID `json:"id"`
	ChargeID         uuid.UUID `json:"chargeId"`
	ProviderRefundID string    `json:"providerRefundId"`
	Status           Status    `json:"status"`
	CreatedAt        time.Time `json:"createdAt"`
}

// EventAction is what the shopper must do, in a charge.requires_action
// event: follow URL before ExpiresAt.
type EventAction struct {
	Type      NextActionType `json:"type"`
	URL       string         `json:"url"`
	ExpiresAt time.Time      `json:"expiresAt"`
}

// EventSession is the checkout session an event concerns: the session's
// events, and a charge event of an attempt made on a session.
type EventSession struct {
	ID        uuid.UUID     `json:"id"`
	Status    SessionStatus `json:"status"`
	ExpiresAt time.Time     `json:"expiresAt"`
}

// EventCharge is the charge a charge.succeeded event announces.
type EventCharge struct {
	ID               uuid.UUID `json:"id"`
	ProviderChargeID string    `json:"providerChargeId"`
	CreatedAt        time.Time `json:"createdAt"`
}

// EventFailure is why nothing was charged, in a charge.failed event.
type EventFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Subject is the NATS subject the event is published on.
func (e Event) Subject() string { return SubjectPrefix + e.Type }

// attemptEventOf is an event about attempt a, of amount in currency for
// orderID, occurring at now; its type and body are its kind's to add.
func attemptEventOf(a Attempt, amount int64, currency, orderID string, now time.Time) Event {
	id := a.ID
	return Event{
		ID: newID(), OccurredAt: now.UTC(), MerchantID: a.MerchantID, IdempotencyKey: a.IdempotencyKey,
		KeySession: a.KeySession, AttemptID: &id, Amount: amount, Currency: currency, OrderID: orderID,
	}
}

// chargeEventOf is the event announcing finalized charge attempt a,
// occurring at now: charge.succeeded with its charge, or charge.failed.
func chargeEventOf(a Attempt, now time.Time) Event {
	t := a.charge()
	e := attemptEventOf(a, t.Input.Amount, t.Input.Currency, t.Input.OrderID, now)
	switch {
	case t.Charge != nil:
		e.Type = EventChargeSucceeded
		e.Charge = &EventCharge{ID: t.Charge.ID, ProviderChargeID: t.Charge.ProviderChargeID, CreatedAt: t.Charge.CreatedAt.UTC()}
	case a.Failure != nil:
		e.Type = EventChargeFailed
		e.Failure = &EventFailure{Code: a.Failure.Code, Message: a.Failure.Message}
	}
	return e
}

// refundEventOf is the event of finalized refund attempt a, occurring at
// now: refund.succeeded, or refund.failed.
func refundEventOf(a Attempt, now time.Time) Event {
	t := a.refund()
	e := attemptEventOf(a, t.Amount, t.Currency, "", now)
	charge := t.Of
	e.RefundOf = &charge
	e.Type = EventRefundSucceeded
	if a.Failure != nil {
		e.Type = EventRefundFailed
		e.Failure = &EventFailure{Code: a.Failure.Code, Message: a.Failure.Message}
	}
	if r := t.Refund; r != nil {
		e.Refund = &EventRefund{ID: r.ID, ChargeID: r.ChargeID, ProviderRefundID: r.ProviderRefundID, Status: r.Status, CreatedAt: r.CreatedAt.UTC()}
		if r.Failure != nil {
			e.Type = EventRefundFailed
			e.Failure = &EventFailure{Code: r.Failure.Code, Message: r.Failure.Message}
		}
	}
	return e
}

// actionEventOf is the charge.requires_action of a, which began waiting
// for the shopper at now, until expiresAt.
func actionEventOf(a Attempt, now, expiresAt time.Time) Event {
	in := a.charge().Input
	e := attemptEventOf(a, in.Amount, in.Currency, in.OrderID, now)
	e.Type = EventChargeRequiresAction
	e.NextAction = &EventAction{Type: NextActionRedirect, URL: a.Wait.URL, ExpiresAt: expiresAt.UTC()}
	return e
}

// sessionEventOf is the event of type about session sess, occurring at
// now; paidBy is the attempt that paid it (checkout_session.paid).
func sessionEventOf(eventType string, sess CheckoutSession, paidBy *Attempt, now time.Time) Event {
	e := Event{
		ID: newID(), Type: eventType, OccurredAt: now.UTC(), MerchantID: sess.MerchantID,
		Amount: sess.Input.Amount, Currency: sess.Input.Currency, OrderID: sess.Input.OrderID,
		CheckoutSession: &EventSession{ID: sess.ID, Status: sess.Status, ExpiresAt: sess.ExpiresAt.UTC()},
	}
	if paidBy != nil {
		id := paidBy.ID
		e.IdempotencyKey, e.KeySession, e.AttemptID = paidBy.IdempotencyKey, paidBy.KeySession, &id
		c := paidBy.charge().Charge
		e.Charge = &EventCharge{ID: c.ID, ProviderChargeID: c.ProviderChargeID, CreatedAt: c.CreatedAt.UTC()}
	}
	return e
}

// cardTestingEventOf is m's merchant.card_testing_suspected: card testing
// suspected through its publishable key keyID at now, until until.
func cardTestingEventOf(m Merchant, keyID uuid.UUID, now, until time.Time) Event {
	return Event{ID: newID(), Type: EventCardTestingSuspected, OccurredAt: now.UTC(), MerchantID: m.ID,
		CardTesting: &EventCardTesting{KeyID: keyID, Until: until.UTC()}}
}

// ParseEvent reads an event's JSON body, as a consumer receives it.
func ParseEvent(body []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, err
	}
	paid := e.Type == EventChargeSucceeded || e.Type == EventSessionPaid || e.Type == EventChargeLateRefunded || e.Type == EventChargeLateVoided ||
		e.Type == EventChargeDuplicateRefunded
	session := e.Type == EventSessionPaid || e.Type == EventSessionExpired
	if e.ID == uuid.Nil || !slices.Contains(EventTypes, e.Type) || paid != (e.Charge != nil) ||
		(session && e.CheckoutSession == nil) || (e.Type == EventChargeRequiresAction) != (e.NextAction != nil) ||
		(e.Type == EventRefundSucceeded && e.Refund == nil) || (e.Type == EventCardTestingSuspected) != (e.CardTesting != nil) ||
		(e.Type == EventChargeCaptured) != (e.Capture != nil) || (e.Type == EventChargeVoided) != (e.Void != nil) ||
		slices.Contains([]string{EventChargeAuthorized, EventAuthorizationExpiring, EventAuthorizationExpired}, e.Type) != (e.Authorization != nil) {
		return Event{}, errMalformedEvent
	}
	return e, nil
}

var errMalformedEvent = Errorf(EINVALID, "not a chargeonce event: it lacks an id, a known type, the charge a charge.succeeded or checkout_session.paid carries, the session a checkout_session event carries, or the key a merchant.card_testing_suspected names")

// authorizationEventOf is the event of type about manual charge attempt
// a's authorization, lapsing at until, occurring at now: charge.authorized
// as its charge is recorded.
func authorizationEventOf(eventType string, a Attempt, until, now time.Time) Event {
	t := a.charge()
	e := attemptEventOf(a, t.Input.Amount, t.Input.Currency, t.Input.OrderID, now)
	e.Type = eventType
	e.Authorization = &EventAuthorization{Amount: t.Input.Amount, ExpiresAt: until.UTC()}
	if t.Charge != nil {
		e.Authorization.ChargeID = t.Charge.ID
		e.Charge = nil
	}
	return e
}
