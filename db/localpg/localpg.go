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
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configures Start.
type Options struct {
	// Dir is the data directory, e.g. "<repo>/.data/postgres"; created if
	// missing.
	Dir string
	// Fast trades durability for speed (fsync, synchronous_commit and
	// full_page_writes off): for test servers, whose data is disposable.
	Fast bool
	// Logger may be nil.
	Logger *slog.Logger
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

	port int
	fast bool
	inst *instance
}

const (
	localUser     = "chargeonce"
	localDatabase = "chargeonce"
	logName       = "postgres.log"
)

// Start returns the PostgreSQL server running in opts.Dir, starting it
// (and creating the cluster) if needed. Callers in several processes may race
// on one Dir: they serialize on a lock file, and exactly one server results.
// The server outlives the calling process; Server.Stop or Stop ends it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inst, err := resolve(opts.Dir, log)
	if err != nil {
		return nil, err
	}
	unlock, err := inst.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if port, ok := inst.running(ctx); ok {
		s := inst.server(port, false, opts.Fast)
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
	port, err := inst.start(ctx, opts.Fast, 0)
	if err != nil {
		return nil, err
	}
	s := inst.server(port, true, opts.Fast)
	if err := inst.ensureDatabase(ctx, s.AdminURL); err != nil {
		return nil, err
	}
	log.Info("started local PostgreSQL", "dir", inst.dir, "port", port, "log", inst.logPath())
	return s, nil
}

// Stop stops the server (pg_ctl stop -m fast), whoever started it.
func (s *Server) Stop(ctx context.Context) error {
	return s.inst.stop(ctx)
}

// Restart stops the server if it runs (pg_ctl stop -m fast, which ends every
// session) and starts it again on the same port, with the Fast setting of the
// Start call that returned s. URL and AdminURL stay valid, so clients
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
	if err := s.inst.stopLocked(ctx); err != nil {
		return err
	}
	if err := s.inst.removeStalePID(); err != nil {
		return err
	}
	_, err = s.inst.start(ctx, s.fast, s.port)
	return err
}

// Stop stops a server running in dir; it is a no-op if none runs there.
func Stop(ctx context.Context, dir string) error {
	inst, err := resolve(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		var nb *noBinariesError
		if errors.As(err, &nb) {
			if _, statErr := os.Stat(filepath.Join(dir, "postmaster.pid")); os.IsNotExist(statErr) {
				return nil // nothing could be running anyway
			}
		}
		return err
	}
	return inst.stop(ctx)
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

type noBinariesError struct{ tried []string }

func (e *noBinariesError) Error() string {
	return fmt.Sprintf("local PostgreSQL: the PostgreSQL server binaries (initdb, pg_ctl, postgres) are needed "+
		"and were not found in $PATH, %s: install them (e.g. `apt-get install postgresql`) "+
		"or set DATABASE_URL to an existing server", strings.Join(e.tried, ", "))
}

// findBinaries returns the directory of initdb, pg_ctl and postgres: $PATH
// first, then the newest /usr/lib/postgresql/*/bin (Debian, Ubuntu), then
// /usr/local/pgsql/bin (source builds). pg_ctl runs the postgres binary that
// sits beside it, so all three must come from one directory.
func findBinaries() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		// Debian links the tools into /usr/local/bin or not at all; follow
		// the link to where the matching initdb and postgres live.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); hasBinaries(dir) {
			return dir, nil
		}
	}
	tried := []string{"/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin"}
	var dirs []string
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(matches, func(a, b string) int { return compareVersions(b, a) }) // newest first
	dirs = append(dirs, matches...)
	dirs = append(dirs, "/usr/local/pgsql/bin")
	for _, dir := range dirs {
		if hasBinaries(dir) {
			return dir, nil
		}
	}
	return "", &noBinariesError{tried: tried}
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// compareVersions orders /usr/lib/postgresql/<version>/bin paths numerically,
// so that 10 sorts above 9.6.
func compareVersions(a, b string) int {
	va := strings.Split(filepath.Base(filepath.Dir(a)), ".")
	vb := strings.Split(filepath.Base(filepath.Dir(b)), ".")
	for i := 0; i < len(va) || i < len(vb); i++ {
		var x, y int
		if i < len(va) {
			x, _ = strconv.Atoi(va[i])
		}
		if i < len(vb) {
			y, _ = strconv.Atoi(vb[i])
		}
		if x != y {
			return x - y
		}
	}
	return strings.Compare(a, b)
}

// unprivilegedUser picks who runs the server for root: the owner of an
// existing cluster in dir (so one created earlier keeps working), else the
// postgres user, else nobody.
func unprivilegedUser(dir string) (*syscall.Credential, error) {
	if fi, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil {
				return credential(u)
			}
			return &syscall.Credential{Uid: st.Uid, Gid: st.Gid, Groups: []uint32{}}, nil
		}
	}
	for _, name := range []string{"postgres", "nobody"} {
		if u, err := user.Lookup(name); err == nil {
			return credential(u)
		}
	}
	return nil, errors.New("local PostgreSQL: running as root, and PostgreSQL refuses root; " +
		"there is neither a postgres nor a nobody user to run it as")
}

func credential(u *user.User) (*syscall.Credential, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != c.Gid {
				c.Groups = append(c.Groups, uint32(g))
			}
		}
	}
	return c, nil
}

// canTraverse reports whether the user of cred can search every existing
// directory from / down to dir. Missing directories are created later by us
// with mode 0755 and so do not block (the umask is checked by re-checking
// after creating them). ACLs are not consulted.
func canTraverse(cred *syscall.Credential, dir string) bool {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			st := fi.Sys().(*syscall.Stat_t)
			var bit os.FileMode
			switch {
			case st.Uid == cred.Uid:
				bit = 0o100
			case st.Gid == cred.Gid || slices.Contains(cred.Groups, st.Gid):
				bit = 0o010
			default:
				bit = 0o001
			}
			if fi.Mode().Perm()&bit == 0 {
				return false
			}
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

// lock takes an exclusive flock on a file beside the data directory, so that
// processes starting or stopping the same server do it one at a time. The
// kernel drops it if the process dies.
func (in *instance) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(in.dir), 0o755); err != nil {
		return nil, fmt.Errorf("local PostgreSQL: %w", err)
	}
	path := in.dir + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local PostgreSQL: open lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("local PostgreSQL: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("local PostgreSQL: waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func (in *instance) logPath() string { return filepath.Join(in.dir, logName) }

func (in *instance) server(port int, started, fast bool) *Server {
	base := "postgres://" + localUser + "@127.0.0.1:" + strconv.Itoa(port) + "/"
	return &Server{
		URL:      base + localDatabase + "?sslmode=disable",
		AdminURL: base + "postgres?sslmode=disable",
		Started:  started,
		port:     port,
		fast:     fast,
		inst:     in,
	}
}

// pidFile holds the fields of postmaster.pid that matter here.
type pidFile struct {
	pid  int
	port int
}

func (in *instance) readPIDFile() (pidFile, error) {
	b, err := os.ReadFile(filepath.Join(in.dir, "postmaster.pid"))
	if err != nil {
		return pidFile{}, err
	}
	lines := strings.Split(string(b), "\n")
	var pf pidFile
	if len(lines) > 0 {
		pf.pid, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	}
	if len(lines) > 3 {
		pf.port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	return pf, nil
}

// running reports the port of a server that is up in this data directory: its
// postmaster.pid names a port on which a server answers, and that server's
// data directory is this one (and not, say, an unrelated server that took
// the port of a stale pid file).
func (in *instance) running(ctx context.Context) (int, bool) {
	pf, err := in.readPIDFile()
	if err != nil || pf.port == 0 || !alive(pf.pid) {
		return 0, false
	}
	cfg, err := pgx.ParseConfig(in.server(pf.port, false, false).AdminURL)
	if err != nil {
		return 0, false
	}
	cfg.ConnectTimeout = 5 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, false
	}
	defer conn.Close(context.Background())
	var dataDir string
	if err := conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dataDir); err != nil {
		return 0, false
	}
	a, errA := os.Stat(dataDir)
	b, errB := os.Stat(in.dir)
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		return 0, false
	}
	return pf.port, true
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// removeStalePID removes a postmaster.pid whose process is gone (a crash, a
// killed container). postgres would cope with most of these itself, but not
// when the pid has since been reused by another process of the same user.
// Called with the lock held and no server answering.
func (in *instance) removeStalePID() error {
	path := filepath.Join(in.dir, "postmaster.pid")
	pf, err := in.readPIDFile()
	if os.IsNotExist(err) {
		return nil
	}
	if err == nil && alive(pf.pid) && isPostgres(pf.pid, in.dir) {
		return fmt.Errorf("local PostgreSQL: a server (pid %d) seems to run in %s but does not answer on port %d "+
			"(if no server runs there, remove postmaster.pid)%s", pf.pid, in.dir, pf.port, in.logTail())
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("local PostgreSQL: remove stale %s: %w", path, err)
	}
	return nil
}

// isPostgres reports whether pid may be a server for data directory dir:
// false only when it is no postgres process at all, or one whose -D names
// another directory (such as the system cluster's, which runs as the same
// user and so may have inherited the pid after a reboot).
func isPostgres(pid int, dir string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return !os.IsNotExist(err) // no /proc: cannot tell, so assume it is
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if base := filepath.Base(args[0]); base != "postgres" && base != "postmaster" {
		// Backends rewrite their title to "postgres: ...".
		return strings.HasPrefix(args[0], "postgres:")
	}
	i := slices.Index(args, "-D")
	if i < 0 || i+1 >= len(args) {
		return true
	}
	d := args[i+1]
	if !filepath.IsAbs(d) {
		cwd, err := os.Readlink(proc + "/cwd")
		if err != nil {
			return true
		}
		d = filepath.Join(cwd, d)
	}
	a, errA := os.Stat(d)
	b2, errB := os.Stat(dir)
	return errA != nil || errB != nil || os.SameFile(a, b2)
}

// ensureCluster creates the data directory and runs initdb if it holds no
// cluster yet. initdb runs into a scratch directory that is renamed into
// place, so an interrupted initdb never leaves a half-made cluster at dir.
func (in *instance) ensureCluster(ctx context.Context, log *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(in.dir, "PG_VERSION")); err == nil {
		return in.own(in.dir)
	}
	if entries, err := os.ReadDir(in.dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("local PostgreSQL: %s is neither empty nor a PostgreSQL data directory", in.dir)
	}
	if in.cred != nil && !canTraverse(in.cred, filepath.Dir(in.dir)) {
		// resolve's check passed, so a directory created since (umask) is in
		// the way; this only happens on unusual umasks.
		return fmt.Errorf("local PostgreSQL: user %d cannot reach %s; check the permissions of its parents",
			in.cred.Uid, in.dir)
	}

	scratch := in.dir + ".initdb"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	if err := in.own(scratch); err != nil {
		return err
	}
	log.Info("local PostgreSQL: creating cluster", "dir", in.dir)
	out, err := in.run(ctx, "initdb", "-D", scratch, "-A", "trust", "-U", localUser, "-E", "UTF8", "--no-locale", "--no-sync")
	if err != nil {
		os.RemoveAll(scratch)
		return fmt.Errorf("local PostgreSQL: initdb: %w\n%s", err, tail(out, 40))
	}
	// rename(2) replaces an empty directory, so a Dir made by hand is fine.
	if err := os.Rename(scratch, in.dir); err != nil {
		os.RemoveAll(scratch)
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	// --no-sync above: a crash before this sync only costs a re-run.
	syncDir(in.dir)
	return nil
}

// own gives the data directory to the server's user, with the mode postgres
// insists on.
func (in *instance) own(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("local PostgreSQL: %s is not a directory", dir)
	}
	if in.cred != nil {
		if err := os.Lchown(dir, int(in.cred.Uid), int(in.cred.Gid)); err != nil {
			return fmt.Errorf("local PostgreSQL: %w", err)
		}
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("local PostgreSQL: %w", err)
		}
	}
	return nil
}

func syncDir(dir string) {
	f, err := os.Open(dir)
	if err == nil {
		f.Sync()
		f.Close()
	}
}

// start starts the server on a loopback port and waits until it accepts
// connections. With port 0 the port is chosen anew at each start so the
// server never collides with a system PostgreSQL on 5432 or with another
// checkout's; the rare loss of the port to another program between choosing
// and binding it is retried. A given port (Restart's) is tried once.
func (in *instance) start(ctx context.Context, fast bool, port int) (int, error) {
	fixed := port != 0
	var lastErr error
	for range 3 {
		if !fixed {
			var err error
			if port, err = freePort(); err != nil {
				return 0, fmt.Errorf("local PostgreSQL: pick a port: %w", err)
			}
		}
		settings := []string{
			"listen_addresses=127.0.0.1",
			"port=" + strconv.Itoa(port),
			// No Unix socket: nothing to clash with, and no limit of ~107
			// bytes on the socket path.
			"unix_socket_directories=''",
			// Tests open many pools at once.
			"max_connections=300",
		}
		if fast {
			settings = append(settings, "fsync=off", "synchronous_commit=off", "full_page_writes=off")
		}
		// pg_ctl passes -o through /bin/sh, so the values must be shell words.
		opts := "-c " + strings.Join(settings, " -c ")
		out, err := in.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", in.dir, "-l", in.logPath(), "-o", opts)
		if err == nil {
			return port, nil
		}
		lastErr = fmt.Errorf("local PostgreSQL: pg_ctl start: %w\n%s%s", err, tail(out, 20), in.logTail())
		if fixed || !strings.Contains(in.logTail(), "could not bind") {
			break
		}
	}
	return 0, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ensureDatabase creates the chargeonce database if it is missing.
func (in *instance) ensureDatabase(ctx context.Context, adminURL string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("local PostgreSQL: connect: %w%s", err, in.logTail())
	}
	defer conn.Close(context.Background())
	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", localDatabase).Scan(&exists)
	if err == nil && !exists {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{localDatabase}.Sanitize())
	}
	if err != nil {
		return fmt.Errorf("local PostgreSQL: create database %s: %w", localDatabase, err)
	}
	return nil
}

// stop stops the server in the data directory, if one runs.
func (in *instance) stop(ctx context.Context) error {
	// Checked before locking too, so stopping nothing creates no lock file.
	if _, err := os.Stat(filepath.Join(in.dir, "postmaster.pid")); os.IsNotExist(err) {
		return nil
	}
	unlock, err := in.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return in.stopLocked(ctx)
}

// stopLocked is stop for a caller that holds the lock.
func (in *instance) stopLocked(ctx context.Context) error {
	pf, err := in.readPIDFile()
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	if !alive(pf.pid) || !isPostgres(pf.pid, in.dir) {
		// A stale pid file (Start clears it): pg_ctl would signal
		// whatever process now has that pid.
		return nil
	}
	out, err := in.run(ctx, "pg_ctl", "stop", "-w", "-t", "60", "-m", "fast", "-D", in.dir)
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(in.dir, "postmaster.pid")); os.IsNotExist(statErr) {
			return nil // it stopped on its own meanwhile
		}
		return fmt.Errorf("local PostgreSQL: pg_ctl stop: %w\n%s%s", err, tail(out, 20), in.logTail())
	}
	return nil
}

// run runs one of the PostgreSQL binaries as the server's user, with an
// environment free of PG* variables that could redirect it, and returns its
// combined output.
func (in *instance) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(in.bins, name), args...)
	// The caller's working directory may be unreadable for the server's user.
	cmd.Dir = "/"
	env := []string{"LC_ALL=C"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			env = append(env, kv)
		}
	}
	if in.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: in.cred}
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// The server that pg_ctl leaves behind keeps no copy of these pipes (it
	// writes to its log file), so Wait returns when pg_ctl does.
	err := cmd.Run()
	return out.Bytes(), err
}

// logTail returns the end of the server log, prefixed for appending to an
// error, or "" if there is none.
func (in *instance) logTail() string {
	f, err := os.Open(in.logPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 8 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	t := tail(b, 20)
	if t == "" {
		return ""
	}
	return "\n" + in.logPath() + " ends with:\n" + t
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
