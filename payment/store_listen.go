package payment

import (
	"context"

	"chargeonce/db"
)

// listen LISTENs on channel on a connection of its own (see db.Listen),
// with the store's reading of its errors.
func (s *store) listen(ctx context.Context, channel string, connected func(), notified func(payload string)) error {
	return interpretError(db.Listen(ctx, s.pool, channel, connected, notified))
}
