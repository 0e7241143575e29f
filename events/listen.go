package events

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Channel is the channel that the outbox's trigger NOTIFYs at each commit
// of an event.
const Channel = "chargeonce_events"

// listen holds one connection of its own that LISTENs on Channel, and
// signals wake (without blocking) at each notification, and after each
// reconnection, since notifications sent while it was away are lost. It
// reconnects with a backoff until ctx ends.
func listen(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, wake chan<- struct{}) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		err := listenOnce(ctx, pool, wake)
		if ctx.Err() != nil {
			return
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

func listenOnce(ctx context.Context, pool *pgxpool.Pool, wake chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	for {
		signal(wake)
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
	}
}

func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
