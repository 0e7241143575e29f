package payment

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Event types: what a finalization announces. The outbox row, the NATS
// subject (SubjectPrefix + type) and the webhook body all carry one of them.
const (
	EventChargeSucceeded = "charge.succeeded"
	EventChargeFailed    = "charge.failed"
)

// SubjectPrefix starts the NATS subject of every event:
// chargeonce.charge.succeeded and chargeonce.charge.failed.
const SubjectPrefix = "chargeonce."

// Event is what chargeonce publishes when an attempt becomes final, written
// to the outbox in the transaction that finalizes the attempt. Its JSON form
// is the message body on NATS and the body of a merchant's webhook. ID is
// unique per event: consumers deduplicate on it.
type Event struct {
	ID             uuid.UUID     `json:"id"`
	Type           string        `json:"type"`
	OccurredAt     time.Time     `json:"occurredAt"`
	MerchantID     uuid.UUID     `json:"merchantId"`
	IdempotencyKey string        `json:"idempotencyKey"`
	AttemptID      uuid.UUID     `json:"attemptId"`
	Amount         int64         `json:"amount"` // in the currency's minor units
	Currency       string        `json:"currency"`
	OrderID        string        `json:"orderId,omitempty"`
	Charge         *EventCharge  `json:"charge,omitempty"`  // charge.succeeded
	Failure        *EventFailure `json:"failure,omitempty"` // charge.failed
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

// eventOf is the event announcing finalized attempt a, occurring at now.
func eventOf(a Attempt, now time.Time) Event {
	e := Event{
		ID: newID(), OccurredAt: now.UTC(), MerchantID: a.MerchantID, IdempotencyKey: a.IdempotencyKey,
		AttemptID: a.ID, Amount: a.Input.Amount, Currency: a.Input.Currency, OrderID: a.Input.OrderID,
	}
	switch {
	case a.Charge != nil:
		e.Type = EventChargeSucceeded
		e.Charge = &EventCharge{ID: a.Charge.ID, ProviderChargeID: a.Charge.ProviderChargeID, CreatedAt: a.Charge.CreatedAt.UTC()}
	case a.Failure != nil:
		e.Type = EventChargeFailed
		e.Failure = &EventFailure{Code: a.Failure.Code, Message: a.Failure.Message}
	}
	return e
}

// ParseEvent reads an event's JSON body, as a consumer receives it.
func ParseEvent(body []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, err
	}
	if e.ID == uuid.Nil || (e.Type != EventChargeSucceeded && e.Type != EventChargeFailed) ||
		(e.Type == EventChargeSucceeded) != (e.Charge != nil) {
		return Event{}, errMalformedEvent
	}
	return e, nil
}

var errMalformedEvent = Errorf(EINVALID, "not a chargeonce event: it lacks an id, a known type, or the charge a charge.succeeded carries")
