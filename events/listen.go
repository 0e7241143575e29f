package events

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/loop"
)

// listen LISTENs on db.EventsChannel (see db.Listen) and signals wake, without
// blocking, at each notification and after each (re)connection, since
// notifications sent while it was away are lost. It reconnects with a
// backoff until ctx ends; the relay's poll covers the gaps.
func listen(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, wake chan<- struct{}) {
	db.ListenAlways(ctx, pool, db.EventsChannel, db.Reconnect{Min: 100 * time.Millisecond, Max: 5 * time.Second, Reset: time.Minute},
		func() { loop.Signal(wake) }, func(string) { loop.Signal(wake) },
		func(err error, retryIn time.Duration) {
			log.Warn("outbox listener lost its connection; polling until it is back", "err", err, "retry_in", retryIn)
		})
}
