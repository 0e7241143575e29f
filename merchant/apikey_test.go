package merchant

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"chargeonce/db"
	"chargeonce/db/dbtest"
	"chargeonce/payment"
)

type keysBundle struct {
	pool *pgxpool.Pool
	dev  *Service // development: development-only keys authenticate
	prod *Service // production: they do not
}

// setupKeys gives Merchants on a fresh database, as development and
// production see it.
func setupKeys(t *testing.T) *keysBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	return &keysBundle{pool: pool, dev: New(pool, true), prod: New(pool, false)}
}

// requireCode requires err to be a domain error with code and a message
// containing each of parts.
func requireCode(t *testing.T, err error, code string, parts ...string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, payment.ErrorCode(err), err.Error())
	for _, p := range parts {
		require.Contains(t, err.Error(), p)
	}
}

// requireNoWholeKeyStored requires that no stored prefix is its whole key.
func requireNoWholeKeyStored(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	whole := dbtest.Query[string](t, pool, "SELECT key_prefix FROM api_keys WHERE key_hash = sha256(convert_to(key_prefix, 'UTF8'))")
	require.Empty(t, whole, "key_prefix holds a whole key")
}

func TestKeyPrefix_IsAShortStartNeverTheWholeKey(t *testing.T) {
	t.Parallel()
	generated, err := newAPIKey(KeySecret)
	require.NoError(t, err)
	require.Len(t, generated, len(KeySecret.keyMark())+43)
	tests := map[string]struct{ key, want string }{
		"demo key":       {"demo-key", "demo"},
		"generated key":  {generated, generated[:len(KeySecret.keyMark())+4]},
		"three bytes":    {"abc", "a"},
		"one byte":       {"x", ""},
		"nineteen bytes": {"0123456789abcdefghi", "012345678"},
		"twenty bytes":   {"0123456789abcdefghij", "0123456789"},
		"long key":       {strings.Repeat("k", 200), "kkkkkkkkkk"},
	}
	for name, tt := range tests {
		require.Equal(t, tt.want, keyPrefix(tt.key), name)
	}
	for n := 1; n <= 64; n++ {
		key := strings.Repeat("k", n)
		p := keyPrefix(key)
		require.NotEqual(t, key, p, "length %d", n)
		require.True(t, strings.HasPrefix(key, p))
		require.LessOrEqual(t, len(p), 10)
		require.LessOrEqual(t, 2*len(p), n, "at least half of the key stays secret")
	}
}

func TestEnsureDevelopmentKey_ShortOrOddKey_IsRefused(t *testing.T) {
	t.Parallel()
	b := setupKeys(t)
	for _, key := range []string{"", "seven77", "has space", "ключ-демо-ключ", "tab\tinside", "bad\xffbytes"} {
		_, err := b.dev.EnsureDevelopmentKey(context.Background(), "demo", key, KeySecret)
		requireCode(t, err, payment.EINVALID, "at least 8 printable ASCII characters")
	}
	_, err := b.dev.EnsureDevelopmentKey(context.Background(), "demo", "eight888", KeySecret)
	require.NoError(t, err)
}

func TestAPIKey_LiveKey_Authenticates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	m, key, err := b.prod.CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(key, KeySecret.keyMark()))

	got, err := b.prod.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, m, got.Merchant)

	_, err = b.prod.Authenticate(ctx, "")
	requireCode(t, err, payment.EUNAUTHENTICATED, "missing API key")
	for _, wrong := range []string{key[:len(key)-1] + "!", key[:20], "co_sk_nothing-like-it", "\xff\xfe\xfd\xfc-not-text", "ключ-демо-ключ"} {
		_, err = b.prod.Authenticate(ctx, wrong)
		requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")
	}
	requireNoWholeKeyStored(t, b.pool)
}

func TestAPIKey_RevokedKey_IsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	_, key, err := b.prod.CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	_, err = b.prod.Authenticate(ctx, key)
	require.NoError(t, err)

	revoked, err := b.prod.RevokeAPIKey(ctx, keyPrefix(key))
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	_, err = b.prod.Authenticate(ctx, key)
	requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")
}

func TestAPIKey_DevelopmentKey_AuthenticatesOnlyWhereAllowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	m, err := b.dev.EnsureDevelopmentKey(ctx, "demo", "demo-key", KeySecret)
	require.NoError(t, err)
	got, err := b.dev.Authenticate(ctx, "demo-key")
	require.NoError(t, err)
	require.Equal(t, m, got.Merchant)
	_, err = b.prod.Authenticate(ctx, "demo-key")
	requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")
}

func TestAPIKey_KeysSharingAPrefix_EachAuthenticateTheirMerchant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	one, err := b.dev.EnsureDevelopmentKey(ctx, "one", "collide-key-1", KeySecret)
	require.NoError(t, err)
	two, err := b.dev.EnsureDevelopmentKey(ctx, "two", "collide-key-2", KeySecret)
	require.NoError(t, err)
	require.Equal(t, keyPrefix("collide-key-1"), keyPrefix("collide-key-2"))

	got, err := b.dev.Authenticate(ctx, "collide-key-1")
	require.NoError(t, err)
	require.Equal(t, one, got.Merchant)
	got, err = b.dev.Authenticate(ctx, "collide-key-2")
	require.NoError(t, err)
	require.Equal(t, two, got.Merchant)
	_, err = b.dev.Authenticate(ctx, "collide-key-3")
	requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")

	// A generated key whose prefix a development key copies still
	// authenticates its own merchant, and the copy its own.
	shop, key, err := b.dev.CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	copycat := keyPrefix(key) + "-but-another-key-entirely!"
	require.Equal(t, keyPrefix(key), keyPrefix(copycat))
	other, err := b.dev.EnsureDevelopmentKey(ctx, "copycat", copycat, KeySecret)
	require.NoError(t, err)
	got, err = b.dev.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, shop, got.Merchant)
	got, err = b.dev.Authenticate(ctx, copycat)
	require.NoError(t, err)
	require.Equal(t, other, got.Merchant)
}

func TestAPIKey_Rotate_OldKeyStaysValidUntilRevoked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	m, oldKey, err := b.prod.CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	_, _, err = b.prod.CreateAPIKey(ctx, "elsewhere", KeySecret)
	require.NoError(t, err)

	rotated, newKey, stillValid, err := b.prod.RotateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	require.Equal(t, m, rotated)
	require.NotEqual(t, oldKey, newKey)
	require.True(t, strings.HasPrefix(newKey, KeySecret.keyMark()))
	require.Len(t, stillValid, 1, "the merchant's other live key, not the new one, not another merchant's")
	require.Equal(t, keyPrefix(oldKey), stillValid[0].Prefix)
	require.Equal(t, "shop", stillValid[0].Merchant)
	require.Nil(t, stillValid[0].RevokedAt)

	for _, key := range []string{oldKey, newKey} {
		got, err := b.prod.Authenticate(ctx, key)
		require.NoError(t, err)
		require.Equal(t, m, got.Merchant)
	}

	_, err = b.prod.RevokeAPIKey(ctx, stillValid[0].ID.String())
	require.NoError(t, err)
	_, err = b.prod.Authenticate(ctx, oldKey)
	requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")
	got, err := b.prod.Authenticate(ctx, newKey)
	require.NoError(t, err)
	require.Equal(t, m, got.Merchant)

	_, _, stillValid, err = b.prod.RotateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	require.Len(t, stillValid, 1, "the revoked key is not listed as valid")
	require.Equal(t, keyPrefix(newKey), stillValid[0].Prefix)
}

func TestAPIKey_Rotate_UnknownMerchant_IsNotFound(t *testing.T) {
	t.Parallel()
	b := setupKeys(t)
	_, key, _, err := b.prod.RotateAPIKey(context.Background(), "nobody", KeySecret)
	requireCode(t, err, payment.ENOTFOUND, "no merchant named nobody", "apikey create nobody")
	require.Empty(t, key)
	_, _, _, err = b.prod.RotateAPIKey(context.Background(), "Not A Name", KeySecret)
	requireCode(t, err, payment.EINVALID, "merchant name")
	require.Empty(t, dbtest.Query[string](t, b.pool, "SELECT name FROM merchants"), "rotate creates no merchant")
}

func TestAPIKey_Revoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	_, shopKey, err := b.prod.CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	_, err = b.dev.EnsureDevelopmentKey(ctx, "one", "collide-key-1", KeySecret)
	require.NoError(t, err)
	_, err = b.dev.EnsureDevelopmentKey(ctx, "two", "collide-key-2", KeySecret)
	require.NoError(t, err)
	keys, err := b.prod.ListAPIKeys(ctx)
	require.NoError(t, err)
	require.Len(t, keys, 3)
	id := map[string]uuid.UUID{}
	for _, k := range keys {
		id[k.Merchant] = k.ID
	}

	t.Run("by prefix", func(t *testing.T) {
		k, err := b.prod.RevokeAPIKey(ctx, keyPrefix(shopKey))
		require.NoError(t, err)
		require.Equal(t, id["shop"], k.ID)
		require.Equal(t, "shop", k.Merchant)
		require.NotNil(t, k.RevokedAt)
		_, err = b.prod.Authenticate(ctx, shopKey)
		requireCode(t, err, payment.EUNAUTHENTICATED)

		_, err = b.prod.RevokeAPIKey(ctx, keyPrefix(shopKey))
		requireCode(t, err, payment.ENOTFOUND, "no live API key has the prefix")
	})
	t.Run("already revoked, by id", func(t *testing.T) {
		_, err := b.prod.RevokeAPIKey(ctx, id["shop"].String())
		requireCode(t, err, payment.EINVALID, "already revoked at", id["shop"].String())
	})
	t.Run("ambiguous prefix", func(t *testing.T) {
		_, err := b.prod.RevokeAPIKey(ctx, keyPrefix("collide-key-1"))
		requireCode(t, err, payment.EINVALID, "ambiguous", "by its id", id["one"].String(), id["two"].String())
		_, err = b.dev.Authenticate(ctx, "collide-key-1")
		require.NoError(t, err, "nothing was revoked")

		k, err := b.prod.RevokeAPIKey(ctx, id["two"].String())
		require.NoError(t, err)
		require.Equal(t, "two", k.Merchant)
		_, err = b.dev.Authenticate(ctx, "collide-key-2")
		requireCode(t, err, payment.EUNAUTHENTICATED)
		_, err = b.dev.Authenticate(ctx, "collide-key-1")
		require.NoError(t, err, "the other key with the prefix still works")

		k, err = b.prod.RevokeAPIKey(ctx, keyPrefix("collide-key-1"))
		require.NoError(t, err, "one live key left under the prefix")
		require.Equal(t, "one", k.Merchant)
	})
	t.Run("unknown", func(t *testing.T) {
		_, err := b.prod.RevokeAPIKey(ctx, uuid.NewString())
		requireCode(t, err, payment.ENOTFOUND, "no API key has the id")
		_, err = b.prod.RevokeAPIKey(ctx, "co_sk_none")
		requireCode(t, err, payment.ENOTFOUND, "no live API key has the prefix")
		_, err = b.prod.RevokeAPIKey(ctx, "")
		requireCode(t, err, payment.EINVALID, "by its id or its prefix")
	})
	t.Run("a whole key is not echoed", func(t *testing.T) {
		_, key, err := b.prod.CreateAPIKey(ctx, "other", KeySecret)
		require.NoError(t, err)
		_, err = b.prod.RevokeAPIKey(ctx, key)
		requireCode(t, err, payment.EINVALID, "by its id or its prefix")
		require.NotContains(t, err.Error(), key)
	})
}

func TestAPIKey_List_ShowsEveryKeyButNoSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	keys, err := b.prod.ListAPIKeys(ctx)
	require.NoError(t, err)
	require.Empty(t, keys)

	before := time.Now().Add(-time.Minute)
	demo, err := b.dev.EnsureDevelopmentKey(ctx, "demo", "demo-key", KeySecret)
	require.NoError(t, err)
	_, first, err := b.prod.CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	_, second, _, err := b.prod.RotateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)
	_, err = b.prod.RevokeAPIKey(ctx, keyPrefix(first))
	require.NoError(t, err)

	keys, err = b.prod.ListAPIKeys(ctx)
	require.NoError(t, err)
	require.Len(t, keys, 3)
	type row struct {
		merchant, prefix string
		dev, revoked     bool
	}
	var rows []row
	for _, k := range keys {
		require.NotEqual(t, uuid.Nil, k.ID)
		require.True(t, k.CreatedAt.After(before))
		rows = append(rows, row{k.Merchant, k.Prefix, k.DevelopmentOnly, k.RevokedAt != nil})
	}
	require.Equal(t, []row{
		{demo.Name, "demo", true, false},
		{"shop", keyPrefix(first), false, true},
		{"shop", keyPrefix(second), false, false},
	}, rows, "by merchant, then age")
	requireNoWholeKeyStored(t, b.pool)
}

func TestAPIKey_DemoKeyStoredWhole_IsCutAndStillAuthenticates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	m, err := b.dev.EnsureDevelopmentKey(ctx, "demo", "demo-key", KeySecret)
	require.NoError(t, err)
	require.Equal(t, []string{"demo"}, dbtest.Query[string](t, b.pool, "SELECT key_prefix FROM api_keys"))

	// As older versions stored it: the whole key in key_prefix. Seeding it
	// again, as every development start does, corrects it.
	_, err = b.pool.Exec(ctx, "UPDATE api_keys SET key_prefix = 'demo-key'")
	require.NoError(t, err)
	_, err = b.dev.EnsureDevelopmentKey(ctx, "demo", "demo-key", KeySecret)
	require.NoError(t, err)
	require.Equal(t, []string{"demo"}, dbtest.Query[string](t, b.pool, "SELECT key_prefix FROM api_keys"))
	got, err := b.dev.Authenticate(ctx, "demo-key")
	require.NoError(t, err)
	require.Equal(t, m, got.Merchant)
	requireNoWholeKeyStored(t, b.pool)
}

func TestAPIKey_RevokedDevelopmentKey_StaysRevokedWhenSeededAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	_, err := b.dev.EnsureDevelopmentKey(ctx, "demo", "demo-key", KeySecret)
	require.NoError(t, err)
	_, err = b.dev.RevokeAPIKey(ctx, "demo")
	require.NoError(t, err)
	_, err = b.dev.EnsureDevelopmentKey(ctx, "demo", "demo-key", KeySecret)
	require.NoError(t, err)
	_, err = b.dev.Authenticate(ctx, "demo-key")
	requireCode(t, err, payment.EUNAUTHENTICATED, "unknown or revoked API key")
	keys, err := b.dev.ListAPIKeys(ctx)
	require.NoError(t, err)
	require.Len(t, keys, 1, "no second row for the same key")
}

func TestMigration00005_CutsWholeDevelopmentKeysOutOfThePrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupKeys(t)
	demo, err := b.dev.EnsureDevelopmentKey(ctx, "demo", "demo-key", KeySecret)
	require.NoError(t, err)
	shop, key, err := b.prod.CreateAPIKey(ctx, "shop", KeySecret)
	require.NoError(t, err)

	sqlDB := stdlib.OpenDBFromPool(b.pool)
	defer sqlDB.Close()
	migrations, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.MigrationsFS())
	require.NoError(t, err)
	_, err = migrations.DownTo(ctx, 4)
	require.NoError(t, err)
	// The rows as older versions stored them: the first 10 characters.
	_, err = b.pool.Exec(ctx, "UPDATE api_keys SET key_prefix = 'demo-key' WHERE development_only")
	require.NoError(t, err)
	_, err = migrations.Up(ctx)
	require.NoError(t, err)

	require.Equal(t, []string{"demo", keyPrefix(key)},
		dbtest.Query[string](t, b.pool, "SELECT key_prefix FROM api_keys ORDER BY development_only DESC"))
	requireNoWholeKeyStored(t, b.pool)
	got, err := b.dev.Authenticate(ctx, "demo-key")
	require.NoError(t, err)
	require.Equal(t, demo, got.Merchant)
	got, err = b.prod.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, shop, got.Merchant)
}

func TestMigration00017_OriginsNotify_DownRemovesTheTrigger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	triggers := func() []string {
		return dbtest.Query[string](t, pool, "SELECT tgname::text FROM pg_trigger WHERE tgrelid = 'merchant_origins'::regclass AND NOT tgisinternal")
	}
	require.Equal(t, []string{"merchant_origins_notify"}, triggers())

	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	migrations, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.MigrationsFS())
	require.NoError(t, err)
	_, err = migrations.DownTo(ctx, 16)
	require.NoError(t, err)
	require.Empty(t, triggers())
	_, err = migrations.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"merchant_origins_notify"}, triggers())
}
