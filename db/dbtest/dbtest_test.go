package dbtest

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
)

func tableExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func currentDatabase(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var name string
	if err := pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestDatabasesAreMigratedAndIsolated(t *testing.T) {
	a := NewPool(t)
	b := NewPool(t)

	for i, pool := range []*pgxpool.Pool{a, b} {
		for _, table := range []string{"merchants", "charges", "charge_attempts"} {
			if !tableExists(t, pool, table) {
				t.Errorf("database %d: table %s missing", i, table)
			}
		}
	}

	mustExec(t, a, "CREATE TABLE only_in_a (id int)")
	mustExec(t, a, "INSERT INTO merchants (id, name) VALUES (gen_random_uuid(), 'acme')")
	if !tableExists(t, a, "only_in_a") {
		t.Error("only_in_a missing where it was created")
	}
	if tableExists(t, b, "only_in_a") {
		t.Error("only_in_a leaked into the other database")
	}
	var n int
	if err := b.QueryRow(context.Background(), "SELECT count(*) FROM merchants").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("other database has %d merchants, want 0", n)
	}

	da, db := currentDatabase(t, a), currentDatabase(t, b)
	if da == db || !strings.HasPrefix(da, "test_") || !strings.HasPrefix(db, "test_") {
		t.Errorf("databases %q and %q: want two distinct test_ databases", da, db)
	}
}

func TestDatabaseDroppedWhenTestEnds(t *testing.T) {
	var name string
	t.Run("uses", func(t *testing.T) {
		pool := NewPool(t)
		name = currentDatabase(t, pool)
		// A connection the test leaks must not keep the database alive.
		if _, err := pgx.Connect(context.Background(), pool.Config().ConnString()); err != nil {
			t.Fatal(err)
		}
	})
	if name == "" {
		t.Fatal("subtest did not get a database")
	}
	var exists bool
	err := adminConn(t).QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

func TestManyParallelDatabases(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			pool := NewPool(t, withOther)
			mustExec(t, pool, "CREATE TABLE mine (id int)")
			if !tableExists(t, pool, "other.things") {
				t.Error("other.things missing")
			}
		})
	}
}

// otherMigrations are another owner's migrations, as the card simulator's
// are: a schema of their own, recorded in a table of their own.
var otherMigrations = fstest.MapFS{
	"00001_things.sql": {Data: []byte("-- +goose Up\nCREATE SCHEMA other;\nCREATE TABLE other.things (id int);\n")},
}

// otherMigrated counts the runs of otherMigrate in this process.
var otherMigrated atomic.Int64

func otherMigrate(ctx context.Context, pool *pgxpool.Pool) error {
	otherMigrated.Add(1)
	return db.ApplyMigrations(ctx, pool, otherMigrations, "other_goose_db_version")
}

var withOther = WithMigrations("other", func() fs.FS { return otherMigrations }, otherMigrate)

func TestTemplateIsSealed(t *testing.T) {
	otherSet := migrationSet{"other", func() fs.FS { return otherMigrations }, otherMigrate}
	for _, tt := range []struct {
		opts []Option
		sets []migrationSet
	}{
		{nil, []migrationSet{appMigrations}},
		{[]Option{withOther}, []migrationSet{appMigrations, otherSet}},
		{[]Option{Empty, withOther}, []migrationSet{otherSet}},
	} {
		NewDatabase(t, tt.opts...) // builds the template if needed
		name, err := template(migrations(tt.opts))
		if err != nil {
			t.Fatal(err)
		}
		sum, err := migrationsHash(tt.sets...)
		if err != nil {
			t.Fatal(err)
		}
		if want := templatePrefix + sum[:12]; name != want {
			t.Errorf("template %q, want %q", name, want)
		}
		var isTemplate, allowConn bool
		err = adminConn(t).QueryRow(context.Background(),
			"SELECT datistemplate, datallowconn FROM pg_database WHERE datname = $1", name).
			Scan(&isTemplate, &allowConn)
		if err != nil {
			t.Fatal(err)
		}
		if !isTemplate || allowConn {
			t.Errorf("template %s: datistemplate=%v datallowconn=%v, want true, false", name, isTemplate, allowConn)
		}
	}
}

// schemaExists reports whether the database of pool has a schema of that name.
func schemaExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	err := pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&ok)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// otherSchemas lists the schemas of the database of pool besides public
// and PostgreSQL's own.
func otherSchemas(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT nspname FROM pg_namespace
		WHERE nspname NOT IN ('public', 'information_schema') AND nspname NOT LIKE 'pg\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestNewDatabase_Default_HasChargeoncesSchemaAlone(t *testing.T) {
	pool := NewPool(t)
	for _, table := range []string{"merchants", "api_keys", "charges", "charge_attempts", "goose_db_version"} {
		if !tableExists(t, pool, table) {
			t.Errorf("table %s missing", table)
		}
	}
	if schemas := otherSchemas(t, pool); len(schemas) != 0 {
		t.Errorf("a default database has other schemas than chargeonce's: %v", schemas)
	}
	if schemaExists(t, pool, "cardsim") || tableExists(t, pool, "cardsim_goose_db_version") {
		t.Error("a default database has the card simulator's schema or its migrations table")
	}
	if !strings.HasPrefix(currentDatabase(t, pool), "test_") {
		t.Errorf("database %q: want a test_ database", currentDatabase(t, pool))
	}
}

func TestNewDatabase_WithMigrations_AppliesThemOnceInTheTemplate(t *testing.T) {
	before := otherMigrated.Load()
	for range 3 {
		pool := NewPool(t, withOther)
		for _, table := range []string{"merchants", "charge_attempts", "goose_db_version", "other.things", "other_goose_db_version"} {
			if !tableExists(t, pool, table) {
				t.Errorf("table %s missing", table)
			}
		}
	}
	if n := otherMigrated.Load() - before; n > 1 {
		t.Errorf("the other migrations ran %d times for three databases, want at most once (into the template)", n)
	}

	pool := NewPool(t, Empty, withOther)
	if !tableExists(t, pool, "other.things") {
		t.Error("Empty with other migrations: other.things missing")
	}
	if tableExists(t, pool, "merchants") || tableExists(t, pool, "goose_db_version") {
		t.Error("Empty with other migrations has chargeonce's schema")
	}
}

func TestNewDatabase_Empty_HasNoSchemaOfOurs(t *testing.T) {
	pool := NewPool(t, Empty)
	var tables int
	err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')`).Scan(&tables)
	if err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("an Empty database has %d tables", tables)
	}
	if schemaExists(t, pool, "cardsim") {
		t.Error("an Empty database has the cardsim schema")
	}
}

func TestAdminURLCanCreateDatabases(t *testing.T) {
	var can bool
	err := adminConn(t).QueryRow(context.Background(),
		"SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&can)
	if err != nil {
		t.Fatal(err)
	}
	if !can {
		t.Error("admin role cannot create databases")
	}
}

func TestWithDatabase(t *testing.T) {
	got, err := withDatabase("postgres://u:p%40ss@127.0.0.1:5432/postgres?sslmode=disable", "x_1")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if u.Path != "/x_1" || u.RawQuery != "sslmode=disable" || pw != "p@ss" {
		t.Errorf("withDatabase(url) = %q", got)
	}

	got, err = withDatabase("host=127.0.0.1 user=postgres dbname=postgres", "x_1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(got)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database != "x_1" {
		t.Errorf("withDatabase(keyword/value) = %q: database %q", got, cfg.Database)
	}
}
