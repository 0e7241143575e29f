package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"golang.org/x/sync/errgroup"

	"chargeonce/payment"
)

// seedChunk is how many stored keys one INSERT adds: small enough to log
// progress and keep each transaction short.
const seedChunk = 250_000

// seedKeys stores n finished attempts of the demo merchant, numbered from
// first, that expire after expiresIn (negative: already expired). They are
// FAILED attempts, which need no charge row: what grows is the table and
// the indexes that every claim touches. Their idempotency keys are random
// UUIDs, as browsers mint them and as the fresh-key runs send them, so that
// each new key lands among millions of stored ones. Ids are time-ordered as
// the server's (UUIDv7): the milliseconds of when a key that expires after
// expiresIn was claimed (a retention, 24h by default, before it expires;
// retention reads the attempts by id up to a retention ago), then the
// number. Two connections share the
// work, one per core of the machine the targets are set for. Random keys
// inserted one by one into a unique index of millions would make the
// seeding, not the benchmark, slow: the index is dropped first and made
// again from its own definition afterwards.
func (b *bench) seedKeys(ctx context.Context, first, n int, expiresIn time.Duration) error {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var keyIndex string
	if err := conn.QueryRow(ctx, "SELECT pg_get_indexdef($1::regclass)", keyIndexName).Scan(&keyIndex); err != nil {
		return fmt.Errorf("reading the key index: %w", err)
	}
	if _, err := conn.Exec(ctx, "DROP INDEX "+keyIndexName); err != nil {
		return err
	}
	if err := b.insertKeys(ctx, first, n, expiresIn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '512MB'"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, keyIndex); err != nil {
		return fmt.Errorf("making the key index again: %w", err)
	}
	_, err = conn.Exec(ctx, "VACUUM ANALYZE charge_attempts")
	return err
}

// keyIndexName is the unique index of (merchant_id, idempotency_key,
// key_session_id) that every claim inserts into (migrations 00002, 00019).
const keyIndexName = "charge_attempts_merchant_key_idx"

func (b *bench) insertKeys(ctx context.Context, first, n int, expiresIn time.Duration) error {
	chunks := make(chan [2]int)
	g, gctx := errgroup.WithContext(ctx)
	for range 2 {
		g.Go(func() error {
			conn, err := pgx.Connect(gctx, b.dbURL)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			for c := range chunks {
				_, err := conn.Exec(gctx, `
INSERT INTO charge_attempts (id, merchant_id, idempotency_key, fingerprint, provider_key, amount, currency,
    payment_method, status, failure_code, failure_message, completed_at, locked_until, expires_at)
SELECT i.id, $1::uuid, gen_random_uuid()::text, '\x00'::bytea, NULL,
    1999, 'USD', 'pm_card_visa', 'FAILED', 'card_declined', 'seeded by bench', now(), now(), now() + $4::interval
FROM generate_series($2::bigint, $3::bigint) g,
    LATERAL (SELECT `+idSQL("$5::bigint", "lpad(to_hex(g), 19, '0')")+` AS id) i`,
					b.merchant, c[0], c[1], expiresIn.String(), time.Now().Add(expiresIn-payment.RetentionDefault).UnixMilli())
				if err != nil {
					return fmt.Errorf("seeding stored keys: %w", err)
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(chunks)
		for lo := first; lo < first+n; lo += seedChunk {
			select {
			case chunks <- [2]int{lo, min(lo+seedChunk, first+n) - 1}:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	return g.Wait()
}

func (b *bench) countAttempts(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM charge_attempts").Scan(&n)
	return n, err
}

// growth measures fresh-key charges with many stored keys, then with the
// retention cleanup deleting expired keys at the same time (issue 11, item
// 6), at concurrency 8 and 32 (those the smoke run has).
func (b *bench) growth(ctx context.Context, provider string) error {
	o := b.opts
	if o.growthKeys == 0 {
		return nil
	}
	var concs []int
	for _, c := range o.concs {
		if c == 8 || c == 32 {
			concs = append(concs, c)
		}
	}
	t0 := time.Now()
	b.logf("growth: storing %d keys", o.growthKeys)
	if err := b.seedKeys(ctx, 1, o.growthKeys, 24*time.Hour); err != nil {
		return err
	}
	b.logf("growth: stored in %s", time.Since(t0).Round(time.Second))
	srv, err := startServer(ctx, b.binary, b.serverEnv("growth", provider))
	if err != nil {
		return err
	}
	grown := Run{Name: "fresh-grown", Provider: provider,
		What: fmt.Sprintf("fresh keys as `fresh`, with %d more finished keys stored", o.growthKeys)}
	b.concRuns([]*server{srv}, &grown, concs, func() vegeta.Targeter { return freshTargeter(visaCard, srv.URL) })
	srv.stop()
	b.results.Runs = append(b.results.Runs, grown)

	if o.expiredKeys == 0 {
		return nil
	}
	t0 = time.Now()
	b.logf("growth: storing %d expired keys", o.expiredKeys)
	if err := b.seedKeys(ctx, o.growthKeys+1, o.expiredKeys, -time.Hour); err != nil {
		return err
	}
	b.logf("growth: stored in %s", time.Since(t0).Round(time.Second))
	before, err := b.countAttempts(ctx)
	if err != nil {
		return err
	}
	// The cleaner as configured by default: it starts on the backlog at
	// once and works it off pass after pass, paced, throughout the runs.
	srv, err = startServer(ctx, b.binary, b.serverEnv("cleanup", provider))
	if err != nil {
		return err
	}
	cleanup := Run{Name: "fresh-cleanup", Provider: provider}
	b.concRuns([]*server{srv}, &cleanup, concs, func() vegeta.Targeter { return freshTargeter(visaCard, srv.URL) })
	srv.stop()
	after, err := b.countAttempts(ctx)
	if err != nil {
		return err
	}
	added := 0
	for _, f := range cleanup.Figures {
		added += f.Requests
	}
	cleanup.What = fmt.Sprintf("as `fresh-grown`, with %d expired keys more, which the retention cleaner (default settings) works off throughout the runs; it deleted about %d keys during them",
		o.expiredKeys, before+added-after)
	b.results.Runs = append(b.results.Runs, cleanup)
	return nil
}
