package payment

import (
	"context"
	"time"

	"chargeonce/db"
)

// listenAlways listens on channel until ctx ends (see db.ListenAlways),
// opening the connection again after each failure with a wait that doubles
// from waitMin to waitMax; lost is told each failure, as the store's error.
func (s *store) listenAlways(ctx context.Context, channel string, waitMin, waitMax time.Duration,
	connected func(), notified func(payload string), lost func(err error, retryIn time.Duration)) {
	db.ListenAlways(ctx, s.pool, channel, db.Reconnect{Min: waitMin, Max: waitMax}, connected, notified,
		func(err error, retryIn time.Duration) { lost(interpretError(err), retryIn) })
}
