package cardsim

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
)

//go:embed migrations/*.sql
var migrations embed.FS

// MigrationsTable is where goose records the simulator's migrations, apart
// from chargeonce's own (goose_db_version): the two are numbered apart, and
// each applies where it belongs.
const MigrationsTable = "cardsim_goose_db_version"

// MigrationsFS returns the simulator's embedded migration files (at its root)
// exactly as Migrate applies them, so that cardsim/cardsimtest can key
// db/dbtest's template database on them.
func MigrationsFS() fs.FS {
	dir, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // a constant, valid path: cannot happen
	}
	return dir
}

// Migrate creates or updates the simulator's schema, cardsim, in the database
// of pool. Call it where the simulator is mounted, and only there, before
// NewHandler serves: a production database never gets the schema. goose
// takes a session advisory lock, so several instances starting at once
// migrate once.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := db.ApplyMigrations(ctx, pool, MigrationsFS(), MigrationsTable); err != nil {
		return fmt.Errorf("cardsim: %w", err)
	}
	return nil
}
