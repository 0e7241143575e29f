package cardsim_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"chargeonce/cardsim"
	"chargeonce/db/dbtest"
)

// shape describes the cardsim schema of pool's database: its tables'
// columns, their constraints by name and definition, and their indexes.
func shape(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
		 FROM information_schema.columns WHERE table_schema = 'cardsim' ORDER BY table_name, ordinal_position`,
		`SELECT c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
		 FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
		 WHERE n.nspname = 'cardsim' ORDER BY 1`,
		`SELECT indexdef FROM pg_indexes WHERE schemaname = 'cardsim' ORDER BY indexname`,
	} {
		rows, err := pool.Query(context.Background(), q)
		require.NoError(t, err)
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			fmt.Fprintln(&b, line)
		}
		require.NoError(t, rows.Err())
	}
	return b.String()
}

func versions(t *testing.T, pool *pgxpool.Pool, table string) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT version_id FROM "+table+" WHERE version_id > 0 ORDER BY version_id")
	require.NoError(t, err)
	var vs []int64
	for rows.Next() {
		var v int64
		require.NoError(t, rows.Scan(&v))
		vs = append(vs, v)
	}
	require.NoError(t, rows.Err())
	return vs
}

func exists(t *testing.T, pool *pgxpool.Pool, relation string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", relation).Scan(&ok))
	return ok
}

func TestMigrate_FreshDatabase_CreatesTheSchemaWithNamedConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t, dbtest.Empty)
	require.NoError(t, cardsim.Migrate(ctx, pool))
	require.NoError(t, cardsim.Migrate(ctx, pool), "a second run is a no-op")

	got := shape(t, pool)
	for _, want := range []string{
		"cardsim.charges charges_pkey PRIMARY KEY (id)",
		"cardsim.charges charges_idempotency_key_key UNIQUE (idempotency_key)",
		"cardsim.charges charges_status_check CHECK ((status = ANY (ARRAY['succeeded'::text, 'failed'::text, 'requires_action'::text, 'canceled'::text])))",
		"cardsim.charges charges_return_url_check CHECK (((status <> 'requires_action'::text) OR (return_url IS NOT NULL)))",
		"charges.return_url text YES",
		"charges.cancellation_reason text YES",
		"CREATE INDEX cardsim_charges_created_at_idx ON cardsim.charges USING btree (created_at)",
		"cardsim.refunds refunds_pkey PRIMARY KEY (id)",
		"cardsim.refunds refunds_charge_id_fkey FOREIGN KEY (charge_id) REFERENCES cardsim.charges(id)",
		"cardsim.refunds refunds_idempotency_key_key UNIQUE (idempotency_key)",
		"cardsim.refunds refunds_amount_check CHECK ((amount > 0))",
		"cardsim.refunds refunds_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text])))",
		"refunds.settles_at timestamp with time zone NO",
		"CREATE INDEX cardsim_refunds_pending_idx ON cardsim.refunds USING btree (settles_at) WHERE (status = 'pending'::text)",
		"charges.capture_method text NO 'automatic'::text",
		"charges.amount_captured bigint NO 0",
		"cardsim.captures captures_idempotency_key_key UNIQUE (idempotency_key)",
		"cardsim.voids voids_charge_id_key UNIQUE (charge_id)",
	} {
		require.Contains(t, got, want)
	}
	require.Equal(t, allVersions, versions(t, pool, cardsim.MigrationsTable))
	require.False(t, exists(t, pool, "goose_db_version"), "chargeonce's migrations table is not the simulator's")
}

// TestMigrate_AfterChargeoncesMigrations_SimulatorCharges: a database that
// chargeonce migrated (as every server does) takes the simulator's
// migrations beside its own, and the simulator then works on it.
func TestMigrate_AfterChargeoncesMigrations_SimulatorCharges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	appVersions := versions(t, pool, "goose_db_version")
	require.False(t, exists(t, pool, "cardsim.charges"))
	require.NoError(t, cardsim.Migrate(ctx, pool))
	require.Equal(t, appVersions, versions(t, pool, "goose_db_version"), "chargeonce's migrations are untouched")
	require.Equal(t, allVersions, versions(t, pool, cardsim.MigrationsTable))

	s := newSimOn(t, pool, cardsim.Config{})
	key := uniqueKey(t)
	resp, raw := s.mustPost(key, chargeBody("pm_card_visa"))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.Equal(t, 1, s.rowsWithKey(key))
}

// visaOrderHash is the request hash that the simulator gave
// chargeBody("pm_card_visa") before return_url existed: a charge stored then
// holds it, and the same request must still replay that charge.
const visaOrderHash = "d96a86f841751e7f2b73506954b619af2a71b844dbf0156026ceea974f2e732f"

// TestMigrate_DatabaseMigratedBefore_AdoptsSchemaAndCharges: a development
// database that chargeonce's old migration 00003 gave the cardsim schema
// keeps it, and its charges, when the simulator's own migrations arrive; the
// result is the schema a fresh database gets, constraint names included.
func TestMigrate_DatabaseMigratedBefore_AdoptsSchemaAndCharges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, err := os.ReadFile("testdata/app_00003_cardsim.sql")
	require.NoError(t, err)
	pool := dbtest.NewPool(t)
	_, err = pool.Exec(ctx, string(old))
	require.NoError(t, err)

	// A charge made by the simulator of then, as it stored it (today's
	// simulator needs today's schema to store one).
	key := uniqueKey(t)
	const id = "ch_madeBeforeMigrations0000"
	_, err = pool.Exec(ctx, `INSERT INTO cardsim.charges
		(id, idempotency_key, request_hash, amount, currency, payment_method, description, status, metadata)
		VALUES ($1, $2, decode($3, 'hex'), 1999, 'USD', 'pm_card_visa', 'Order 42', 'succeeded', $4)`,
		id, key, visaOrderHash, `{"client_idempotency_key": "client-1", "merchant": "demo"}`)
	require.NoError(t, err)

	require.NoError(t, cardsim.Migrate(ctx, pool))
	require.Equal(t, allVersions, versions(t, pool, cardsim.MigrationsTable))

	// The charge is still there, and its key still replays it.
	s := newSimOn(t, pool, cardsim.Config{})
	replay, again := s.mustPost(key, chargeBody("pm_card_visa"))
	require.Equal(t, http.StatusOK, replay.StatusCode, string(again))
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	c := decode[charge](t, again)
	require.Equal(t, id, c.ID)
	require.Equal(t, "succeeded", c.Status)
	require.Nil(t, c.ReturnURL)
	require.Nil(t, c.NextAction)
	require.Equal(t, 1, s.rowsWithKey(key))

	fresh := dbtest.NewPool(t)
	require.NoError(t, cardsim.Migrate(ctx, fresh))
	require.Equal(t, shape(t, fresh), shape(t, pool), "the adopted schema is the one a fresh database gets")
}

func TestMigrate_Concurrently_MigratesOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t, dbtest.Empty)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = cardsim.Migrate(context.Background(), pool) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, allVersions, versions(t, pool, cardsim.MigrationsTable))
	require.True(t, exists(t, pool, "cardsim.charges"))
}

// allVersions are the simulator's migrations.
var allVersions = []int64{1, 2, 3, 4, 5}

// TestMigrate_EachDown_IsTheSchemaOfBefore: each migration's Down section
// leaves the schema that the one before made, and Up then applies again.
func TestMigrate_EachDown_IsTheSchemaOfBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	provider := func(pool *pgxpool.Pool) *goose.Provider {
		p, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(pool), cardsim.MigrationsFS(),
			goose.WithTableName(cardsim.MigrationsTable))
		require.NoError(t, err)
		return p
	}
	for _, v := range allVersions[1:] {
		before := dbtest.NewPool(t, dbtest.Empty)
		_, err := provider(before).UpTo(ctx, v-1)
		require.NoError(t, err)

		pool := dbtest.NewPool(t, dbtest.Empty)
		require.NoError(t, cardsim.Migrate(ctx, pool))
		_, err = provider(pool).DownTo(ctx, v-1)
		require.NoError(t, err)
		require.Equal(t, shape(t, before), shape(t, pool), "down to %d", v-1)
		require.NoError(t, cardsim.Migrate(ctx, pool))
		require.Equal(t, allVersions, versions(t, pool, cardsim.MigrationsTable))
	}
}
