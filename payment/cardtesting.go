package payment

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// CardTestingSuspected announces that card testing is suspected through
// m's publishable key keyID, from at until until: the outbox takes m's
// merchant.card_testing_suspected, which reaches the stream and the
// merchant's webhook like every event. The suspicion itself is the
// caller's (package cardtesting): this is its record.
func (s *Service) CardTestingSuspected(ctx context.Context, m Merchant, keyID uuid.UUID, at, until time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	err := s.store.inTx(ctx, func(q *txQueries) error {
		return insertEvent(ctx, q, cardTestingEventOf(m, keyID, at, until))
	})
	return interpretError(err)
}
