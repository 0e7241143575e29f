// Package dbtest hands tests fresh, migrated PostgreSQL databases.
//
// The server is TEST_DATABASE_URL when set, else the project-local server in
// <repo>/.data/test-postgres (started on first use and left running, so the
// next test run starts instantly; `make` stops it). Migrations run once into a
// template database named after a hash of the migration files; each test then
// gets a cheap copy of it (CREATE DATABASE ... TEMPLATE) that is dropped when
// the test ends.
//
// A database holds chargeonce's schema, as in production. WithMigrations
// adds another owner's (the card simulator's, say, through
// cardsim/cardsimtest) to the template, and Empty leaves chargeonce's out.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"chargeonce/db"
	"chargeonce/db/localpg"
	"chargeonce/internal/proc"
)

// EnvURL names the variable that points tests at an existing server. Its user
// must be allowed to CREATE DATABASE.
const EnvURL = "TEST_DATABASE_URL"

// setupTimeout bounds starting the server and building the template; a first
// start runs initdb, which takes a few seconds.
const setupTimeout = 2 * time.Minute

// server is the admin side of the test server, set up once per process. A
// failure is kept and reported to every caller's test rather than panicking.
var server = sync.OnceValues(func() (*admin, error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	adminURL := os.Getenv(EnvURL)
	if adminURL == "" {
		root, err := proc.ModuleRoot()
		if err != nil {
			return nil, fmt.Errorf("%w; set %s", err, EnvURL)
		}
		srv, err := localpg.Start(ctx, localpg.Options{
			Dir:  filepath.Join(root, ".data", "test-postgres"),
			Fast: true,
		})
		if err != nil {
			return nil, fmt.Errorf("start local test PostgreSQL (or set %s): %w", EnvURL, err)
		}
		adminURL = srv.AdminURL
	}
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return nil, fmt.Errorf("parse test database url: %w", err)
	}
	// Only CREATE/DROP DATABASE go through this pool; a few connections do.
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open test admin pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reach test database server %s: %w", redact(adminURL), err)
	}
	return &admin{url: adminURL, pool: pool}, nil
})

// Option changes what a new database holds, which by default is
// chargeonce's migrations (db.Migrate) alone, as a production database has
// them.
type Option func(*contents)

// contents is what a new database holds: chargeonce's migrations unless
// noApp, then sets in the order given.
type contents struct {
	noApp bool
	sets  []migrationSet
}

// Empty leaves chargeonce's migrations out: alone, a database without any
// migration, for tests of the migrations themselves.
var Empty Option = func(c *contents) { c.noApp = true }

// WithMigrations adds another owner's migrations, applied by migrate after
// chargeonce's, into the template: its files, recorded under name, key the
// template's hash with chargeonce's, so that a change to either builds a
// new one. Use it for a schema that many tests want in place, such as the
// card simulator's (cardsim/cardsimtest); name must be that owner's alone.
func WithMigrations(name string, files func() fs.FS, migrate func(context.Context, *pgxpool.Pool) error) Option {
	return func(c *contents) { c.sets = append(c.sets, migrationSet{name, files, migrate}) }
}

// migrationSet is one owner's migrations: the files, which key the template,
// and how to apply them.
type migrationSet struct {
	name    string
	files   func() fs.FS
	migrate func(context.Context, *pgxpool.Pool) error
}

var appMigrations = migrationSet{"db", db.MigrationsFS, db.Migrate}

// migrations lists the sets of opts, in the order they are applied.
func migrations(opts []Option) []migrationSet {
	var c contents
	for _, opt := range opts {
		opt(&c)
	}
	if c.noApp {
		return c.sets
	}
	return append([]migrationSet{appMigrations}, c.sets...)
}

// templates builds each template database once per process, by its name.
var templates = struct {
	sync.Mutex
	byName map[string]func() error
}{byName: map[string]func() error{}}

// template returns the name of the template database migrated by sets,
// building it on first use: templatePrefix and a hash of their files.
func template(sets []migrationSet) (string, error) {
	sum, err := migrationsHash(sets...)
	if err != nil {
		return "", err
	}
	name := templatePrefix + sum[:12]
	templates.Lock()
	build, ok := templates.byName[name]
	if !ok {
		build = sync.OnceValue(func() error {
			a, err := server()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
			defer cancel()
			return a.ensureTemplate(ctx, name, sets)
		})
		templates.byName[name] = build
	}
	templates.Unlock()
	return name, build()
}

// templatePrefix begins the name of every template database.
const templatePrefix = "chargeonce_tmpl_"

type admin struct {
	url  string
	pool *pgxpool.Pool
}

// AdminURL returns a URL of the test server with rights to CREATE DATABASE.
func AdminURL(t testing.TB) string {
	t.Helper()
	a, err := server()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return a.url
}

// NewDatabase creates a fresh database, migrated by chargeonce's migrations
// and those that opts add (or none, with Empty alone), and returns its URL;
// it is dropped when the test ends.
func NewDatabase(t testing.TB, opts ...Option) string {
	t.Helper()
	a, err := server()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	// template0 is PostgreSQL's own pristine database; template1 may hold
	// what an administrator of TEST_DATABASE_URL's server put there.
	tmpl := "template0"
	if sets := migrations(opts); len(sets) > 0 {
		if tmpl, err = template(sets); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	name := "test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if _, err := a.pool.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(tmpl)); err != nil {
		t.Fatalf("dbtest: create database %s from %s: %v", name, tmpl, err)
	}
	// Registered before any pool of the caller's, so it runs after they close;
	// FORCE still ends any connection a test leaked.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := a.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	u, err := withDatabase(a.url, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return u
}

// NewPool returns a pool on NewDatabase(t, opts...), closed when the test ends.
func NewPool(t testing.TB, opts ...Option) *pgxpool.Pool {
	t.Helper()
	return Open(t, NewDatabase(t, opts...)) // its close runs before NewDatabase's drop (cleanups are LIFO)
}

// Open connects to the database at url (db.Connect) for the test, and
// closes the pool when the test ends.
func Open(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := db.Connect(ctx, url)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ensureTemplate makes sure the template name, migrated by sets, exists and
// is ready to copy. Concurrent test processes serialize on an advisory lock
// held on one admin connection while they check, create and migrate it.
func (a *admin) ensureTemplate(ctx context.Context, name string, sets []migrationSet) error {
	pc, err := a.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire admin connection: %w", err)
	}
	// Taken out of the pool and closed at the end: closing the session is what
	// releases the advisory lock, on every return path.
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey()); err != nil {
		return fmt.Errorf("lock template creation: %w", err)
	}

	var ready bool
	err = conn.QueryRow(ctx,
		"SELECT datistemplate AND NOT datallowconn FROM pg_database WHERE datname = $1", name).Scan(&ready)
	switch {
	case err == nil && ready:
		return nil
	case err == nil:
		// Left half-built by a process that died while migrating it.
		if _, err := conn.Exec(ctx, "DROP DATABASE "+ident(name)+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop unfinished template %s: %w", name, err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("look up template %s: %w", name, err)
	}

	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
		return fmt.Errorf("create template %s: %w", name, err)
	}
	u, err := withDatabase(a.url, name)
	if err != nil {
		return err
	}
	pool, err := db.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("connect to template %s: %w", name, err)
	}
	for _, set := range sets {
		if err = set.migrate(ctx, pool); err != nil {
			break
		}
	}
	pool.Close()
	if err != nil {
		return fmt.Errorf("migrate template %s: %w", name, err)
	}
	// CREATE DATABASE ... TEMPLATE fails while anyone is connected to the
	// template, so forbid new connections and end the ones that linger.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(name)+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("seal template %s: %w", name, err)
	}
	if err := terminateConnections(ctx, conn, name); err != nil {
		return err
	}
	// Marking it last makes "datistemplate AND NOT datallowconn" mean "done".
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(name)+" WITH IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("mark template %s: %w", name, err)
	}
	return nil
}

// terminateConnections ends every session on database name and waits until
// they are gone: pool.Close returns before the server notices.
func terminateConnections(ctx context.Context, conn *pgx.Conn, name string) error {
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid))
			FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, name).Scan(&n)
		if err != nil {
			return fmt.Errorf("end connections to %s: %w", name, err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("end connections to %s: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// migrationsHash is the hex SHA-256 over the names and contents of the
// migrations of sets, each under its set's name.
func migrationsHash(sets ...migrationSet) (string, error) {
	h := sha256.New()
	for _, set := range sets {
		fsys := set.files()
		// WalkDir visits in lexical order, so the hash is stable.
		err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s/%s\x00%d\x00", set.name, path, len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("hash %s migrations: %w", set.name, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// templateLockKey is the advisory lock key that serializes template creation.
func templateLockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("chargeonce/db/dbtest template"))
	return int64(h.Sum64())
}

// withDatabase returns connString pointed at database name. It accepts URLs
// and keyword/value strings, both of which TEST_DATABASE_URL may hold.
func withDatabase(connString, name string) (string, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", fmt.Errorf("parse database url: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// In keyword/value form the last occurrence of a keyword wins.
	return connString + " dbname=" + name, nil
}

// redact hides a password in a URL for error messages.
func redact(connString string) string {
	u, err := url.Parse(connString)
	if err != nil || u.User == nil {
		return connString
	}
	return u.Redacted()
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand documents it)
	return hex.EncodeToString(b)
}

// TestingT is what Query and ListenerPIDs need of a test: a *testing.T, or
// the collector of an EventuallyWithT condition, which runs off the test's
// goroutine and must not end it.
type TestingT interface {
	Errorf(format string, args ...any)
	FailNow()
}

// Query runs a one-column query on pool and returns its values, failing t
// on an error.
func Query[V any](t TestingT, pool *pgxpool.Pool, sql string, args ...any) []V {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, sql, args...)
	if err == nil {
		var values []V
		if values, err = pgx.CollectRows(rows, pgx.RowTo[V]); err == nil {
			return values
		}
	}
	t.Errorf("dbtest: %s: %v", sql, err)
	t.FailNow()
	return nil
}

// ListenerPIDs are the backends of the LISTEN connections (db.Listen names
// them chargeonce-listen) on pool's database: a test kills them to cut a
// listener off.
func ListenerPIDs(t TestingT, pool *pgxpool.Pool) []int {
	return Query[int](t, pool,
		`SELECT pid FROM pg_stat_activity WHERE application_name = 'chargeonce-listen' AND datname = current_database()`)
}
