// Package db owns chargeonce's PostgreSQL schema and connections: the numbered
// migrations (embedded and applied at startup), the connection pool, the
// LISTEN connections (listen.go), and the one classifier of database errors
// that every store's seam asks (errors.go). The project-local PostgreSQL
// server used when no DATABASE_URL is given is db/localpg's, and db/dbtest
// hands tests a fresh, migrated database.
package db

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"log"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Connect opens a pool and checks that the database answers.
func Connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = PoolMaxConnsDefault(runtime.GOMAXPROCS(0))
	}
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		registerUUID(conn)
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reach database: %w", err)
	}
	return pool, nil
}

// PoolMaxConnsDefault is the pool's size on a machine of cores (GOMAXPROCS)
// unless DATABASE_URL sets pool_max_conns: 4 a core, at least 8 and at most
// 20. pgx's own default, max(4, cores), starves a small machine: every
// charge holds a connection for its claim and again for its recording, the
// replays and the in-process simulator share the pool, and on 2 cores 4
// connections left a 200-request same-key storm answering PROCESSING for
// want of a connection to read the stored result. More than the machine can
// run only makes backends wait on each other: on 2 cores with PostgreSQL on
// the same machine, 8 connections against 20 gave fresh charges with a
// 300 ms provider at concurrency 256 about 6% more throughput and a 15%
// lower p99, and a 1,000-request storm over two instances ended sooner
// (bench/README.md, "The pool was larger than the machine"). 20 keeps three
// instances (60) well inside PostgreSQL's default max_connections (100).
func PoolMaxConnsDefault(cores int) int32 {
	return int32(min(max(4*cores, 8), 20))
}

// MigrationsFS returns the embedded migration files (at its root) exactly as
// Migrate applies them, so db/dbtest can key its template database on them.
func MigrationsFS() fs.FS {
	dir, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // a constant, valid path: cannot happen
	}
	return dir
}

// Migrate applies every migration of chargeonce's schema that the database
// lacks.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return ApplyMigrations(ctx, pool, MigrationsFS(), "")
}

// ApplyMigrations applies the goose migrations in fsys (at its root) that
// the database lacks, recording them in table (goose's own when empty), so
// that a schema of another owner, such as the simulated provider's, keeps
// its own numbering. goose takes a session advisory lock, so several
// instances starting at once migrate once.
func ApplyMigrations(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, table string) error {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker), goose.WithLogger(log.New(io.Discard, "", 0))}
	if table != "" {
		opts = append(opts, goose.WithTableName(table))
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, fsys, opts...)
	if err != nil {
		return fmt.Errorf("prepare migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}
