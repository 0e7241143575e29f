package events

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
)

// listen LISTENs on db.EventsChannel (see db.Listen) and signals wake, without
// blocking, at each notification and after each (re)connection, since
// notifications sent while it was away are lost. It reconnects with a
// backoff until ctx ends; the relay's poll covers the gaps.
func listen(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, wake chan<- struct{}) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		started := time.Now()
		err := db.Listen(ctx, pool, db.EventsChannel, func() { signal(wake) }, func(string) { signal(wake) })
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			backoff = 0 // it held a while: a new outage starts over
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
		log.Warn("outbox listener lost its connection; polling until it is back", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
