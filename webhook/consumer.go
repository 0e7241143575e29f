package webhook

import (
	"context"
	"time"

	"chargeonce/events"
	"chargeonce/payment"
)

// Consumer is the durable consumer's name on the CHARGES stream, shared by
// every instance so that each event is handled by one of them.
const Consumer = "webhooks"

// Delays of the consumer: before a message that could not be stored is
// redelivered, and the bound of its insert.
const (
	nakDelay          = 5 * time.Second
	storeEventTimeout = 10 * time.Second
)

// consumer queues each event for its merchant's endpoint: a delivery row
// holding the exact body, committed before the message is acked. A merchant
// without an endpoint: acked, nothing stored. A redelivered event: the row
// exists (its key is the event and the endpoint), nothing is stored twice.
func (s *Service) consumer() events.Consumer {
	return events.Consumer{
		Durable:     Consumer,
		Description: "chargeonce: queues each charge event for its merchant's webhook endpoint",
		Subjects:    events.Subjects,
		AckWait:     s.cfg.AckWait,
		NakDelay:    nakDelay,
		Logger:      s.log,
		Handle: func(ctx context.Context, e payment.Event, body []byte) error {
			dbCtx, cancel := context.WithTimeout(ctx, storeEventTimeout)
			defer cancel()
			queued, err := s.store.insertDelivery(dbCtx, e, body, s.cfg.Now())
			if err == nil && queued {
				s.log.Debug("webhook delivery queued", "event_id", e.ID, "type", e.Type, "merchant_id", e.MerchantID)
				s.notify()
			}
			return err
		},
	}
}
