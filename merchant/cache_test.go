package merchant

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"chargeonce/db"
	"chargeonce/db/dbtest"
	"chargeonce/metrics"
	"chargeonce/payment"
)

// noTTL is a cache TTL no test waits for: a refusal of a cached key came by
// a notification (or the loss of the LISTEN connection).
const noTTL = time.Hour

// watchWithin bounds a wait for the cache's listener: generous, the
// machine is noisy.
const watchWithin = 30 * time.Second

// revocationWithin bounds how long a revocation may take to reach a cache:
// a notification's latency, with room for a noisy machine.
const revocationWithin = 2 * time.Second

// startCached returns a production Merchants on pool whose Run listens until
// the test ends, once it listens.
func startCached(t *testing.T, pool *pgxpool.Pool, cfg Config) *Service {
	t.Helper()
	ms := NewWithConfig(pool, false, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ms.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, ms.cache.isLive, watchWithin, 10*time.Millisecond, "Run listens")
	return ms
}

// revokeUnheard revokes key with the triggers off (session_replication_role
// replica), so no notification tells any cache: what still accepts the key
// afterwards did not read the database.
func revokeUnheard(t *testing.T, pool *pgxpool.Pool, key string) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL session_replication_role = replica")
	require.NoError(t, err)
	tag, err := tx.Exec(ctx, "UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1", hashAPIKey(key))
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	require.NoError(t, tx.Commit(ctx))
}

// cacheCounts reads the cache's counter: hits, misses, bypasses.
func cacheCounts(m *metrics.Metrics) [3]int {
	return [3]int{
		int(testutil.ToFloat64(m.AuthCache.WithLabelValues(metrics.CacheHit))),
		int(testutil.ToFloat64(m.AuthCache.WithLabelValues(metrics.CacheMiss))),
		int(testutil.ToFloat64(m.AuthCache.WithLabelValues(metrics.CacheBypass))),
	}
}

func TestAPIKeyCache_ChangedElsewhere_RefusedWithoutWaitingForTheTTL(t *testing.T) {
	t.Parallel()
	tests := map[string]func(t *testing.T, pool *pgxpool.Pool, key string){
		"revoked by another Merchants (the CLI's way)": func(t *testing.T, pool *pgxpool.Pool, key string) {
			_, err := New(pool, false).RevokeAPIKey(context.Background(), keyPrefix(key))
			require.NoError(t, err)
		},
		"revoked by hand in SQL": func(t *testing.T, pool *pgxpool.Pool, key string) {
			_, err := pool.Exec(context.Background(), "UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1", hashAPIKey(key))
			require.NoError(t, err)
		},
		"key row deleted": func(t *testing.T, pool *pgxpool.Pool, key string) {
			_, err := pool.Exec(context.Background(), "DELETE FROM api_keys WHERE key_hash = $1", hashAPIKey(key))
			require.NoError(t, err)
		},
		"merchant deleted": func(t *testing.T, pool *pgxpool.Pool, _ string) {
			_, err := pool.Exec(context.Background(), "DELETE FROM merchants WHERE name = 'shop'")
			require.NoError(t, err)
		},
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.NewPool(t)
			shop, key, err := New(pool, false).CreateAPIKey(ctx, "shop", KeySecret)
			require.NoError(t, err)
			m := metrics.Discard()
			cached := startCached(t, pool, Config{CacheTTL: noTTL, Metrics: m})
			for range 2 {
				got, err := cached.Authenticate(ctx, key)
				require.NoError(t, err)
				require.Equal(t, shop, got.Merchant)
			}
			require.Equal(t, [3]int{1, 1, 0}, cacheCounts(m), "the second one came from the cache")

			change(t, pool, key)
			require.Eventually(t, func() bool {
				_, err := cached.Authenticate(ctx, key)
				return payment.ErrorCode(err) == payment.EUNAUTHENTICATED
			}, revocationWithin, 5*time.Millisecond, "the change's notification empties the cache; the TTL is an hour")
		})
	}
}

func TestAPIKeyCache_MerchantRenamed_CacheServesTheNewName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	_, key, err := New(pool, false).CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	cached := startCached(t, pool, Config{CacheTTL: noTTL})
	got, err := cached.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "shop", got.Merchant.Name)

	_, err = pool.Exec(ctx, "UPDATE merchants SET name = 'boutique' WHERE name = 'shop'")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := cached.Authenticate(ctx, key)
		return err == nil && got.Merchant.Name == "boutique"
	}, revocationWithin, 5*time.Millisecond)
}

func TestAPIKeyCache_Hit_ReadsNoDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDatabase(t)
	pool, err := db.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	shop, key, err := New(pool, false).CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	_, other, err := New(pool, false).CreateAPIKey(ctx, "other", KeySecret)
	require.NoError(t, err)
	// The cached Merchants reads through a pool of its own, closed below.
	own, err := db.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(own.Close)
	m := metrics.Discard()
	cached := startCached(t, own, Config{CacheTTL: noTTL, Metrics: m})
	_, err = cached.Authenticate(ctx, key)
	require.NoError(t, err)

	// A revocation that no notification tells: the cache still serves the
	// key, while a Merchants without a cache reads that it is revoked. That
	// is why revocation goes through the trigger (migration 00009).
	revokeUnheard(t, pool, key)
	got, err := cached.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, shop, got.Merchant)
	_, err = New(pool, false).Authenticate(ctx, key)
	requireCode(t, err, payment.EUNAUTHENTICATED)

	// Without its pool, the cached key is still served; any other key is not.
	own.Close()
	got, err = cached.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, shop, got.Merchant)
	_, err = cached.Authenticate(ctx, other)
	require.Error(t, err)
	require.Equal(t, [3]int{2, 2, 0}, cacheCounts(m))
}

func TestAPIKeyCache_Failures_AreNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	_, err := b.dev.EnsureDevelopmentKey(ctx, "demo", "demo-key", KeySecret)
	require.NoError(t, err)
	m := metrics.Discard()
	prod := startCached(t, b.pool, Config{CacheTTL: noTTL, Metrics: m})
	for range 3 {
		_, err := prod.Authenticate(ctx, "demo-key")
		requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")
		_, err = prod.Authenticate(ctx, "co_sk_unknown-key-entirely")
		requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")
	}
	require.Equal(t, [3]int{0, 6, 0}, cacheCounts(m), "a development key in production, and an unknown key, are looked up every time")
}

func TestAPIKeyCache_ListenLost_BypassedUntilBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	shop, key, err := New(pool, false).CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	_, later, err := New(pool, false).CreateAPIKey(ctx, "later", KeySecret)
	require.NoError(t, err)
	m := metrics.Discard()
	// A fixed wait before reconnecting: the window in which the cache must
	// be bypassed.
	const away = 4 * time.Second
	cached := startCached(t, pool, Config{CacheTTL: noTTL, Metrics: m, ReconnectMin: away, ReconnectMax: away})
	_, err = cached.Authenticate(ctx, key)
	require.NoError(t, err)
	_, err = cached.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, [3]int{1, 1, 0}, cacheCounts(m))

	lost := dbtest.ListenerPIDs(t, pool)
	require.Len(t, lost, 1)
	_, err = pool.Exec(ctx, "SELECT pg_terminate_backend($1)", lost[0])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !cached.cache.isLive() }, revocationWithin, time.Millisecond)

	// Deaf to notifications, it reads every key from the database: a
	// revocation nobody notifies is seen at once.
	revokeUnheard(t, pool, key)
	_, err = cached.Authenticate(ctx, key)
	requireCode(t, err, payment.EUNAUTHENTICATED)
	for range 2 {
		got, err := cached.Authenticate(ctx, later)
		require.NoError(t, err)
		require.Equal(t, "later", got.Merchant.Name)
	}
	require.False(t, cached.cache.isLive(), "still within the wait before reconnecting")
	require.Equal(t, [3]int{1, 1, 3}, cacheCounts(m))

	// Back, it caches again.
	require.Eventually(t, cached.cache.isLive, watchWithin, 10*time.Millisecond, "listening again")
	_, err = cached.Authenticate(ctx, later)
	require.NoError(t, err)
	revokeUnheard(t, pool, later)
	got, err := cached.Authenticate(ctx, later)
	require.NoError(t, err, "served from the cache again")
	require.Equal(t, "later", got.Merchant.Name)
	require.NotEqual(t, shop.ID, got.Merchant.ID)
	require.Equal(t, [3]int{2, 2, 3}, cacheCounts(m))
}

func TestAPIKeyCache_WithoutRun_EveryRequestReadsTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	m := metrics.Discard()
	ms := NewWithConfig(pool, false, Config{CacheTTL: noTTL, Metrics: m})
	_, key, err := ms.CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	_, err = ms.Authenticate(ctx, key)
	require.NoError(t, err)
	revokeUnheard(t, pool, key)
	_, err = ms.Authenticate(ctx, key)
	requireCode(t, err, payment.EUNAUTHENTICATED)
	require.Equal(t, [3]int{0, 0, 2}, cacheCounts(m))
}

func TestAPIKeyCache_EntryOlderThanTTL_IsReadAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	_, key, err := New(pool, false).CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	const ttl = time.Minute
	now := time.Now()
	ms := NewWithConfig(pool, false, Config{CacheTTL: ttl})
	ms.cache.now = func() time.Time { return now } // before Run: nothing reads it yet
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ms.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, ms.cache.isLive, watchWithin, 10*time.Millisecond)

	_, err = ms.Authenticate(ctx, key)
	require.NoError(t, err)
	revokeUnheard(t, pool, key)
	now = now.Add(ttl - time.Nanosecond)
	_, err = ms.Authenticate(ctx, key)
	require.NoError(t, err, "still fresh: from the cache")
	now = now.Add(time.Nanosecond)
	_, err = ms.Authenticate(ctx, key)
	requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")
}

func TestKeyCache_Bounded_AndKeepsNoLookupOlderThanAReset(t *testing.T) {
	t.Parallel()
	c := newKeyCache(time.Hour, 2, metrics.Discard())
	hash := func(i byte) [sha256.Size]byte { return [sha256.Size]byte{i} }
	_, _, gen := c.get(hash(1), time.Hour)
	c.put(hash(1), Caller{Merchant: payment.Merchant{Name: "one"}}, gen)
	require.Zero(t, c.entries.Len(), "not live: nothing is kept")

	c.reset(true)
	for i := range byte(5) {
		_, _, gen := c.get(hash(i), time.Hour)
		c.put(hash(i), Caller{Merchant: payment.Merchant{Name: "m"}}, gen)
		require.LessOrEqual(t, c.entries.Len(), 2)
	}
	_, ok, _ := c.get(hash(4), time.Hour)
	require.True(t, ok, "the last one is kept")

	// A lookup that began before a reset (a notification: some key changed)
	// may have read the key before it changed; its result is not kept.
	_, _, gen = c.get(hash(9), time.Hour)
	c.reset(true)
	c.put(hash(9), Caller{Merchant: payment.Merchant{Name: "stale"}}, gen)
	_, ok, _ = c.get(hash(9), time.Hour)
	require.False(t, ok)
}

func TestReauthenticate_TakesFromTheCacheOnlyWhatStaysFreshUntilTheNextCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	_, key, err := New(pool, false).CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	const ttl, nextCheck = time.Minute, 10 * time.Second
	now := time.Now()
	m := metrics.Discard()
	ms := NewWithConfig(pool, false, Config{CacheTTL: ttl, Metrics: m})
	ms.cache.now = func() time.Time { return now } // before Run: nothing reads it yet
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ms.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, ms.cache.isLive, watchWithin, 10*time.Millisecond)

	_, err = ms.Authenticate(ctx, key)
	require.NoError(t, err)
	// Revoked where no notification tells this server: only the age of its
	// cache entry bounds how long it believes the key.
	revokeUnheard(t, pool, key)
	now = now.Add(ttl - nextCheck - time.Nanosecond)
	_, err = ms.Reauthenticate(ctx, key, nextCheck)
	require.NoError(t, err, "fresh until the next check: from the cache")
	now = now.Add(time.Nanosecond)
	_, err = ms.Reauthenticate(ctx, key, nextCheck)
	requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")
	// What a re-check found revoked is no longer served to requests either.
	_, err = ms.Authenticate(ctx, key)
	requireCode(t, err, payment.EUNAUTHENTICATED)
	require.Equal(t, [3]int{1, 3, 0}, cacheCounts(m))
}

func TestOnChange_ToldOfEveryChangeOfKeysMerchantsAndOrigins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	other := New(pool, false) // another instance, or the CLI
	_, key, err := other.CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	_, _, err = other.AddOrigin(ctx, "shop", "https://old.example")
	require.NoError(t, err)

	ms := NewWithConfig(pool, false, Config{CacheTTL: noTTL})
	told := make(chan struct{}, 16)
	ms.OnChange(func() { told <- struct{}{} })
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ms.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	wait := func(what string) {
		t.Helper()
		select {
		case <-told:
		case <-time.After(watchWithin):
			t.Fatalf("not told: %s", what)
		}
	}
	wait("listening: changes may have passed unheard before")

	for _, c := range []struct {
		what   string
		change func() error
	}{
		{"origin added", func() error { _, _, err := other.AddOrigin(ctx, "shop", "https://new.example"); return err }},
		{"origin removed", func() error { _, err := other.RemoveOrigin(ctx, "shop", "https://old.example"); return err }},
		{"key revoked", func() error { _, err := other.RevokeAPIKey(ctx, keyPrefix(key)); return err }},
		{"merchant renamed", func() error {
			_, err := pool.Exec(ctx, "UPDATE merchants SET name = 'boutique' WHERE name = 'shop'")
			return err
		}},
	} {
		require.NoError(t, c.change(), c.what)
		wait(c.what)
	}
}
