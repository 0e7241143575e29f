package db_test

import (
	"context"
	"io/fs"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/db"
	"chargeonce/db/dbtest"
)

// TestMigrate_FreshDatabase_CreatesNoCardsimSchema: chargeonce's migrations
// alone, as a production server applies them, make chargeonce's tables and
// no cardsim schema; the simulator's schema is the simulator's to create,
// where it is mounted. Migration 00003, which used to create it, is still
// recorded, so that versions keep their meaning.
func TestMigrate_FreshDatabase_CreatesNoCardsimSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t, dbtest.Empty)
	require.NoError(t, db.Migrate(ctx, pool))
	require.NoError(t, db.Migrate(ctx, pool), "a second run is a no-op")

	for _, table := range []string{"merchants", "api_keys", "charges", "charge_attempts"} {
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists))
		require.True(t, exists, table)
	}
	var schemas, cardsimRelations int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'cardsim'").Scan(&schemas))
	require.Zero(t, schemas, "no cardsim schema")
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM pg_class WHERE relname LIKE 'cardsim%'").Scan(&cardsimRelations))
	require.Zero(t, cardsimRelations, "no cardsim table anywhere, its migrations table included")

	var versions []int64
	rows, err := pool.Query(ctx, "SELECT version_id FROM goose_db_version WHERE version_id > 0 ORDER BY version_id")
	require.NoError(t, err)
	for rows.Next() {
		var v int64
		require.NoError(t, rows.Scan(&v))
		versions = append(versions, v)
	}
	require.NoError(t, rows.Err())
	files, err := fs.Glob(db.MigrationsFS(), "*.sql")
	require.NoError(t, err)
	require.Len(t, versions, len(files), "every migration is applied")
	require.Contains(t, versions, int64(3), "00003 is applied, and does nothing")
}

// TestConnect_PoolSize: the pool is PoolMaxConnsDefault connections for the
// machine's cores, not pgx's max(4, cores), unless the URL says
// pool_max_conns.
func TestConnect_PoolSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDatabase(t, dbtest.Empty)
	pool, err := db.Connect(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	require.Equal(t, db.PoolMaxConnsDefault(runtime.GOMAXPROCS(0)), pool.Config().MaxConns)

	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	sized, err := db.Connect(ctx, url+sep+"pool_max_conns=7")
	require.NoError(t, err)
	defer sized.Close()
	require.Equal(t, int32(7), sized.Config().MaxConns, "the operator's pool_max_conns wins")
}

// TestPoolMaxConnsDefault: 4 connections a core, never fewer than 8 (the
// storm's reads need them beside the charges) nor more than 20.
func TestPoolMaxConnsDefault(t *testing.T) {
	t.Parallel()
	for cores, want := range map[int]int32{1: 8, 2: 8, 3: 12, 4: 16, 5: 20, 64: 20} {
		require.Equal(t, want, db.PoolMaxConnsDefault(cores), "%d cores", cores)
	}
}
