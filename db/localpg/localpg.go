// Package localpg runs the project-local PostgreSQL server that chargeonce
// uses in development and tests when no database is given: a cluster in a
// data directory of the project (.data/postgres, .data/test-postgres), made
// with the server binaries installed on the machine and served on 127.0.0.1
// and a free port, as an unprivileged user when chargeonce runs as root.
// Processes that start or stop the server of one data directory take turns
// on a lock file beside it, so exactly one server results, and it outlives
// them until it is stopped. The package knows nothing of chargeonce's
// schema: package db migrates the database.
package localpg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// Options configures Start.
type Options struct {
	// Dir is the data directory, e.g. "<repo>/.data/postgres"; created if
	// missing.
	Dir string
	// Fast trades durability for speed (fsync, synchronous_commit and
	// full_page_writes off): for test servers, whose data is disposable.
	Fast bool
	// Settings are more server settings (name=value, each a shell word),
	// given to every start: the bench loads pg_stat_statements with them.
	Settings []string
	// Logger may be nil.
	Logger *slog.Logger
}

// start is what each start of the server sets beyond its own settings.
func (o Options) start() []string {
	var s []string
	if o.Fast {
		s = append(s, "fsync=off", "synchronous_commit=off", "full_page_writes=off")
	}
	return append(s, o.Settings...)
}

// Server is a PostgreSQL server that chargeonce runs from the server
// binaries on the machine, listening on 127.0.0.1 only.
type Server struct {
	// URL is the chargeonce database, e.g.
	// postgres://chargeonce@127.0.0.1:PORT/chargeonce?sslmode=disable.
	URL string
	// AdminURL is the same server's "postgres" database, for CREATE DATABASE.
	AdminURL string
	// Started is true when Start started the server, false when it found
	// it already running and reused it.
	Started bool

	port     int
	settings []string // what each start gives the server beyond its own (Options.start)
	inst     *instance
}

// Database is the database (and role) that Start provides on every server.
const Database = "chargeonce"

const (
	localUser = Database
	logName   = "postgres.log"
)

// Start returns the PostgreSQL server running in opts.Dir, starting it
// (and creating the cluster) if needed. Callers in several processes may race
// on one Dir: they serialize on a lock file, and exactly one server results.
// The server outlives the calling process; Server.Stop or Stop ends it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	inst, log, unlock, err := lockInstance(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if port, ok := inst.running(ctx); ok {
		s := inst.server(port, false, opts.start())
		if err := inst.ensureDatabase(ctx, s.AdminURL); err != nil {
			return nil, err
		}
		log.Debug("reusing local PostgreSQL", "dir", inst.dir, "port", port)
		return s, nil
	}

	if err := inst.ensureCluster(ctx, log); err != nil {
		return nil, err
	}
	if err := inst.removeStalePID(); err != nil {
		return nil, err
	}
	port, err := inst.start(ctx, opts.start(), 0)
	if err != nil {
		return nil, err
	}
	s := inst.server(port, true, opts.start())
	if err := inst.ensureDatabase(ctx, s.AdminURL); err != nil {
		return nil, err
	}
	log.Info("started local PostgreSQL", "dir", inst.dir, "port", port, "log", inst.logPath())
	return s, nil
}

// lockInstance resolves opts.Dir and takes its lock, which the caller must
// release.
func lockInstance(ctx context.Context, opts Options) (*instance, *slog.Logger, func(), error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inst, err := resolve(opts.Dir, log)
	if err != nil {
		return nil, nil, nil, err
	}
	unlock, err := inst.lock(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return inst, log, unlock, nil
}

// Stop stops the server (pg_ctl stop -m fast), whoever started it.
func (s *Server) Stop(ctx context.Context) error {
	return s.inst.stop(ctx, "fast")
}

// Crash stops the server as a crash would (pg_ctl stop -m immediate: every
// process quits at once, with no shutdown checkpoint), so that its next
// start (Restart) recovers from the WAL, as after a power cut: it replays
// what committed and empties the unlogged tables.
func (s *Server) Crash(ctx context.Context) error {
	return s.inst.stop(ctx, "immediate")
}

// Restart stops the server if it runs (pg_ctl stop -m fast, which ends every
// session) and starts it again on the same port, with the Fast and Settings
// of the Start call that returned s. URL and AdminURL stay valid, so clients
// and their pools can reconnect: this is for tests of what happens when the
// database goes away and comes back. Called after Stop, it only starts the
// server. It fails, rather than move to another port, if another program
// took the port meanwhile.
func (s *Server) Restart(ctx context.Context) error {
	unlock, err := s.inst.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.inst.stopLocked(ctx, "fast"); err != nil {
		return err
	}
	if err := s.inst.removeStalePID(); err != nil {
		return err
	}
	_, err = s.inst.start(ctx, s.settings, s.port)
	return err
}

// Stop stops a server running in dir; it is a no-op if none runs there.
func Stop(ctx context.Context, dir string) error {
	inst, err := resolveToStop(dir)
	if inst == nil {
		return err
	}
	return inst.stop(ctx, "fast")
}

// resolveToStop resolves dir for stopping the server that may run there:
// nil and no error when PostgreSQL's binaries are missing and so nothing
// can be running in dir.
func resolveToStop(dir string) (*instance, error) {
	inst, err := resolve(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		var nb *noBinariesError
		if errors.As(err, &nb) {
			if _, statErr := os.Stat(filepath.Join(dir, "postmaster.pid")); os.IsNotExist(statErr) {
				return nil, nil
			}
		}
		return nil, err
	}
	return inst, nil
}

// Remove stops the server running in dir, if one does, and removes its
// cluster: dir, and the directory under the temp dir that stands in for
// dir when the server's user cannot reach it (Runner.Dir). The next Start
// with dir makes a new cluster.
func Remove(ctx context.Context, dir string) error {
	inst, err := resolveToStop(dir)
	if err != nil {
		return err
	}
	if inst != nil {
		if err := inst.stop(ctx, "fast"); err != nil {
			return err
		}
		if err := os.RemoveAll(inst.dir); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

// instance is a data directory together with how to run its server.
type instance struct {
	dir  string // the data directory actually used (may be the fallback)
	bins string // directory holding initdb, pg_ctl and postgres
	// cred runs the binaries as an unprivileged user when we are root, which
	// initdb and postgres refuse to run as; nil otherwise.
	cred *syscall.Credential
}

// resolve finds the binaries and, when running as root, the user to run them
// as and a data directory that user can reach.
func resolve(dir string, log *slog.Logger) (*instance, error) {
	if dir == "" {
		return nil, errors.New("local PostgreSQL: no data directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	inst := &instance{dir: abs, bins: bins}
	if os.Geteuid() != 0 {
		return inst, nil
	}

	inst.cred, err = unprivilegedUser(abs)
	if err != nil {
		return nil, err
	}
	if !canTraverse(inst.cred, filepath.Dir(abs)) {
		// Making the user's directories (a clone under /root, say) world
		// searchable is not ours to do, so keep the cluster elsewhere, at a
		// path that is stable for this Dir.
		sum := sha256.Sum256([]byte(abs))
		fallback := filepath.Join(os.TempDir(), "chargeonce-pg-"+hex.EncodeToString(sum[:6]))
		log.Info("local PostgreSQL: the server's user cannot reach the data directory; using a directory under the temp dir",
			"dir", abs, "uid", inst.cred.Uid, "using", fallback)
		inst.dir = fallback
		// An existing cluster there may belong to another user than the
		// default; it must be run as its owner.
		if inst.cred, err = unprivilegedUser(fallback); err != nil {
			return nil, err
		}
		if !canTraverse(inst.cred, filepath.Dir(fallback)) {
			return nil, fmt.Errorf("local PostgreSQL: user %d can reach neither %s nor %s",
				inst.cred.Uid, abs, fallback)
		}
	}
	return inst, nil
}
