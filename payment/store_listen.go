package payment

import (
	"context"
	"time"

	"chargeonce/db"
)

// listen LISTENs on channel on a connection of its own (see db.Listen),
// with the store's reading of its errors.
func (s *store) listen(ctx context.Context, channel string, connected func(), notified func(payload string)) error {
	return interpretError(db.Listen(ctx, s.pool, channel, connected, notified))
}

// listenAlways listens on channel until ctx ends, opening the connection
// again after each failure with a wait that doubles from waitMin to waitMax,
// and starts over at waitMin once a connection held longer than waitMax.
// lost is told each failure and the wait before the next try; notifications
// sent meanwhile are gone, which connected (called again) must make up for.
func (s *store) listenAlways(ctx context.Context, channel string, waitMin, waitMax time.Duration,
	connected func(), notified func(payload string), lost func(err error, retryIn time.Duration)) {
	wait := waitMin
	for ctx.Err() == nil {
		started := time.Now()
		err := s.listen(ctx, channel, connected, notified)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > waitMax {
			wait = waitMin // it held a while: a new outage starts over
		}
		lost(err, wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, waitMax)
	}
}
