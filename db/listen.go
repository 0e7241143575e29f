package db

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EventsChannel is the channel on which an instance tells the others that
// events it wrote committed: one NOTIFY for many commits, with an
// EventsNotice as JSON, sent after the commits rather than in them
// (events.Notifier). Before migration 00015 the outbox's trigger sent one
// per event, in the writing transaction, naming its attempt.
const EventsChannel = "chargeonce_events"

// EventsNotice is the payload on EventsChannel: the attempts whose events
// the instance From committed; All, when they are too many to name, says
// that every watcher should look.
type EventsNotice struct {
	From     string           `json:"from"`
	Attempts []NoticedAttempt `json:"attempts,omitempty"`
	All      bool             `json:"all,omitempty"`
}

// NoticedAttempt names an attempt: its merchant and idempotency key.
type NoticedAttempt struct {
	MerchantID     uuid.UUID `json:"merchantId"`
	IdempotencyKey string    `json:"idempotencyKey"`
	// KeySession is the checkout session among whose keys the key is;
	// uuid.Nil (absent) for the merchant's own.
	KeySession uuid.UUID `json:"keySession,omitzero"`
}

// APIKeysChannel is the channel that api_keys' and merchants' triggers
// (migration 00009) NOTIFY, with an empty payload, at each commit that
// changes a key or a merchant: servers empty their cache of authentications.
const APIKeysChannel = "chargeonce_api_keys"

// listenHealthInterval is how long the LISTEN connection may be silent
// before it is asked to prove that it is alive: a peer gone without a word
// (a failover, a network cut) would otherwise leave it waiting forever.
const listenHealthInterval = 30 * time.Second

// listenConnectTimeout bounds opening the LISTEN connection, and each check
// that it is alive.
const listenConnectTimeout = 10 * time.Second

// Listen opens a connection of its own (outside the pool, which it would
// otherwise hold one of for good), LISTENs on channel, calls connected once
// it does, and then notified with the payload of each notification, until
// ctx ends or the connection fails; it returns why.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, connected func(), notified func(payload string)) error {
	cfg := pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "chargeonce-listen"
	connectCtx, cancel := context.WithTimeout(ctx, listenConnectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(connectCtx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(connectCtx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenHealthInterval)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			notified(n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Silence: a timed-out wait leaves the connection usable; ask it.
			pingCtx, cancel := context.WithTimeout(ctx, listenConnectTimeout)
			err := conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// Reconnect is how ListenAlways waits before it opens the LISTEN
// connection again: Min first, doubling up to Max; a connection held longer
// than Reset (default Max) starts the waits over at Min.
//
// The live status and the API key cache reconnect from
// ReconnectMinDefault to ReconnectMaxDefault unless told otherwise.
type Reconnect struct {
	Min, Max, Reset time.Duration
}

// Defaults of the listeners' Reconnect, the one place they are written.
const (
	ReconnectMinDefault = 100 * time.Millisecond
	ReconnectMaxDefault = 10 * time.Second
)

// ListenAlways runs Listen until ctx ends, opening the connection again
// after each failure with the waits of r. lost is told each failure and the
// wait before the next try; notifications sent meanwhile are gone, which
// connected (called again) must make up for.
func ListenAlways(ctx context.Context, pool *pgxpool.Pool, channel string, r Reconnect,
	connected func(), notified func(payload string), lost func(err error, retryIn time.Duration)) {
	reset := r.Reset
	if reset == 0 {
		reset = r.Max
	}
	wait := r.Min
	for ctx.Err() == nil {
		started := time.Now()
		err := Listen(ctx, pool, channel, connected, notified)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > reset {
			wait = r.Min // it held a while: a new outage starts over
		}
		lost(err, wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, r.Max)
	}
}
