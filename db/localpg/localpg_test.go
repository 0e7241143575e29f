package localpg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// reachableDir returns a fresh directory that an unprivileged server user can
// reach: t.TempDir makes its directories 0700, which as root would send every
// test down the fallback path.
func reachableDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts, stops and kills PostgreSQL servers of its own; skipped with -short")
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// start calls Start and arranges for the server to be stopped and a
// fallback directory (outside t.TempDir) removed when the test ends.
func start(t *testing.T, dir string, fast bool) *Server {
	t.Helper()
	s, err := Start(context.Background(), Options{Dir: dir, Fast: fast})
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, dir, s.inst.dir)
	return s
}

var cleanups sync.Map // data dirs with a cleanup registered

func cleanupServer(t *testing.T, dir, dataDir string) {
	if _, loaded := cleanups.LoadOrStore(dataDir, true); loaded {
		return
	}
	t.Cleanup(func() {
		if err := Stop(context.Background(), dir); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if !strings.HasPrefix(dataDir, filepath.Dir(dir)) {
			os.RemoveAll(dataDir)
			os.Remove(dataDir + ".lock")
		}
		cleanups.Delete(dataDir)
	})
}

func query[T any](t *testing.T, url, sql string) T {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v T
	if err := conn.QueryRow(context.Background(), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func exec1(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestStartConcurrentCallsShareOneServer(t *testing.T) {
	dir := filepath.Join(reachableDir(t), "pg")
	const n = 8
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			servers[i], errs[i] = Start(context.Background(), Options{Dir: dir, Fast: true})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	cleanupServer(t, dir, servers[0].inst.dir)

	started := 0
	for _, s := range servers {
		if s.Started {
			started++
		}
		if s.URL != servers[0].URL || s.AdminURL != servers[0].AdminURL {
			t.Errorf("URLs differ: %s / %s", s.URL, servers[0].URL)
		}
	}
	if started != 1 {
		t.Errorf("%d calls report starting the server, want 1", started)
	}
	s := servers[0]
	if s.inst.dir != dir {
		t.Errorf("data directory %s, want %s (no fallback expected)", s.inst.dir, dir)
	}
	if !strings.HasPrefix(s.URL, "postgres://chargeonce@127.0.0.1:") || !strings.HasSuffix(s.URL, "/chargeonce?sslmode=disable") {
		t.Errorf("URL %s", s.URL)
	}
	if s.port == 5432 {
		t.Error("took the system PostgreSQL's port")
	}
	if db := query[string](t, s.URL, "SELECT current_database()"); db != "chargeonce" {
		t.Errorf("connected to %s", db)
	}
	for setting, want := range map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": "",
		"max_connections":         "300",
		"fsync":                   "off",
		"synchronous_commit":      "off",
		"full_page_writes":        "off",
		"server_encoding":         "UTF8",
		"lc_collate":              "C",
	} {
		if got := query[string](t, s.AdminURL, "SHOW "+setting); got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres.log")); err != nil {
		t.Error(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode %v", fi.Mode().Perm())
	}
	if os.Geteuid() == 0 && fi.Sys().(*syscall.Stat_t).Uid == 0 {
		t.Error("data directory owned by root")
	}
}

// TestHelperStart is run as a child process by
// TestStartConcurrentProcesses; it does nothing in a normal run.
func TestHelperStart(t *testing.T) {
	dir := os.Getenv("CHARGEONCE_TEST_PG_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	s, err := Start(context.Background(), Options{Dir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("RESULT %s %v\n", s.URL, s.Started)
}

func TestStartConcurrentProcesses(t *testing.T) {
	dir := filepath.Join(reachableDir(t), "pg")
	const n = 4
	outs := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStart$", "-test.v")
			cmd.Env = append(os.Environ(), "CHARGEONCE_TEST_PG_DIR="+dir)
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	cleanupServer(t, dir, dir)
	urls := map[string]bool{}
	started := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i])
		}
		for line := range strings.Lines(string(outs[i])) {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "RESULT" {
				urls[f[1]] = true
				if f[2] == "true" {
					started++
				}
			}
		}
	}
	if len(urls) != 1 || started != 1 {
		t.Errorf("got URLs %v and %d starts, want one URL and one start", urls, started)
	}
}

func TestStopAndRestart(t *testing.T) {
	dir := filepath.Join(reachableDir(t), "pg")
	s := start(t, dir, false)
	if !s.Started {
		t.Fatal("fresh directory: want Started")
	}
	if got := query[string](t, s.AdminURL, "SHOW fsync"); got != "on" {
		t.Errorf("fsync = %s without Fast", got)
	}
	exec1(t, s.URL, "CREATE TABLE kept (id int)")

	again := start(t, dir, false)
	if again.Started || again.URL != s.URL {
		t.Errorf("second call: Started=%v URL=%s, want reuse of %s", again.Started, again.URL, s.URL)
	}

	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(context.Background(), s.AdminURL); err == nil {
		t.Fatal("server still answers after Stop")
	}
	if err := Stop(context.Background(), dir); err != nil {
		t.Errorf("Stop on a stopped server: %v", err)
	}

	restarted := start(t, dir, false)
	if !restarted.Started {
		t.Error("after Stop: want Started")
	}
	if !query[bool](t, restarted.URL, "SELECT to_regclass('kept') IS NOT NULL") {
		t.Error("table created before the restart is gone")
	}

	if err := Stop(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid after Stop: %v", err)
	}
}

// Settings reach the server at its start and at every Restart, beside
// Fast's.
func TestSettingsGivenAtEveryStart(t *testing.T) {
	dir := filepath.Join(reachableDir(t), "pg")
	s, err := Start(context.Background(), Options{Dir: dir, Fast: true, Settings: []string{"work_mem=7MB", "pg_stat_statements.track=all"}})
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, dir, s.inst.dir)
	for _, when := range []string{"after Start", "after Restart"} {
		if got := query[string](t, s.AdminURL, "SHOW work_mem"); got != "7MB" {
			t.Errorf("%s: work_mem = %s, want 7MB", when, got)
		}
		if got := query[string](t, s.AdminURL, "SHOW fsync"); got != "off" {
			t.Errorf("%s: fsync = %s, want Fast kept beside the settings", when, got)
		}
		if err := s.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRestartKeepsPortAndData(t *testing.T) {
	dir := filepath.Join(reachableDir(t), "pg")
	s := start(t, dir, true)
	exec1(t, s.URL, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (42)")
	url := s.URL

	if err := s.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.URL != url {
		t.Errorf("URL changed to %s, want %s", s.URL, url)
	}
	if got := query[int](t, url, "SELECT id FROM kept"); got != 42 {
		t.Errorf("after Restart: kept holds %d, want 42", got)
	}
	if got := query[string](t, s.AdminURL, "SHOW fsync"); got != "off" {
		t.Errorf("after Restart: fsync = %s, want Fast kept", got)
	}

	// After Stop, Restart starts the server again, on the same port.
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := query[int](t, url, "SELECT id FROM kept"); got != 42 {
		t.Errorf("after Stop and Restart: kept holds %d, want 42", got)
	}

	// A port taken meanwhile is an error, not a move to another port.
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(s.port))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := s.Restart(context.Background()); err == nil {
		t.Error("Restart succeeded although the port was taken")
	}
	if port, ok := s.inst.running(context.Background()); ok {
		t.Errorf("a server runs on port %d after the failed Restart", port)
	}
}

func TestStopWithoutServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never-created")
	if err := Stop(context.Background(), dir); err != nil {
		t.Error(err)
	}
	inst, err := resolve(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{inst.dir, inst.dir + ".lock"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("Stop without a server created %s", p)
		}
	}
}

// unreachableDir returns a data directory, named name, that the server's
// user cannot reach, as root: like a clone under /root, its parent is 0700
// and owned by root, so localpg keeps the cluster under the temp dir. It
// skips the test unless run as root, and returns the 0700 parent too.
func unreachableDir(t *testing.T, name string) (dir, locked string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	locked = filepath.Join(reachableDir(t), "home")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(locked, "repo", ".data", name), locked
}

func TestFallbackWhenUserCannotReachDir(t *testing.T) {
	dir, locked := unreachableDir(t, "postgres")

	s := start(t, dir, true)
	sum := sha256.Sum256([]byte(dir))
	want := filepath.Join(os.TempDir(), "chargeonce-pg-"+hex.EncodeToString(sum[:6]))
	if s.inst.dir != want {
		t.Errorf("data directory %s, want fallback %s", s.inst.dir, want)
	}
	if !s.Started || query[string](t, s.URL, "SELECT current_database()") != "chargeonce" {
		t.Error("fallback server does not work")
	}
	if _, err := os.Stat(filepath.Join(want, "postgres.log")); err != nil {
		t.Error(err)
	}
	fi, err := os.Stat(locked)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("the user's directory was changed to %v", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(locked, "repo")); !os.IsNotExist(err) {
		t.Errorf("created directories under the unreachable parent: %v", err)
	}

	// The same Dir finds the same fallback server again, and stops it.
	again := start(t, dir, true)
	if again.Started || again.URL != s.URL {
		t.Errorf("second call: Started=%v URL=%s, want reuse of %s", again.Started, again.URL, s.URL)
	}
	if err := Stop(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(want, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid after Stop: %v", err)
	}
}

// A caller that starts anew (the bench, each run) removes the cluster with
// Remove, and as root behind an unreachable parent the cluster is the
// fallback under the temp dir: removing dir alone left it, with every row
// of the runs before, for the next Start to find.
func TestRemove_FallbackCluster_TheNextStartIsFresh(t *testing.T) {
	dir, _ := unreachableDir(t, "bench-postgres")
	s := start(t, dir, true)
	if s.inst.dir == dir {
		t.Fatal("the test needs the cluster kept under the temp dir")
	}
	exec1(t, s.URL, "CREATE TABLE left_by_the_run_before (id int)")

	if err := Remove(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.inst.dir); !os.IsNotExist(err) {
		t.Fatalf("the cluster under %s is still there: %v", s.inst.dir, err)
	}
	again := start(t, dir, true)
	if !again.Started {
		t.Error("the next Start found a server running")
	}
	if query[bool](t, again.URL, "SELECT to_regclass('left_by_the_run_before') IS NOT NULL") {
		t.Error("the next Start found the table of the run before")
	}
	// Nothing runs and nothing is kept: Remove is a no-op but for dir.
	if err := Remove(context.Background(), filepath.Join(reachableDir(t), "none")); err != nil {
		t.Error(err)
	}
}

func TestFailedStartReportsLogTail(t *testing.T) {
	dir := filepath.Join(reachableDir(t), "pg")
	s := start(t, dir, true)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "shared_buffers = 'not a size'")
	f.Close()

	_, err = Start(context.Background(), Options{Dir: dir, Fast: true})
	if err == nil {
		t.Fatal("start with a broken postgresql.conf succeeded")
	}
	t.Logf("error as reported:\n%v", err)
	if !strings.Contains(err.Error(), "shared_buffers") || !strings.Contains(err.Error(), "postgres.log") {
		t.Errorf("error lacks the log tail: %v", err)
	}
}

func TestCreateDatabase_AnewEachTime_ItsURL(t *testing.T) {
	s := start(t, filepath.Join(reachableDir(t), "pg"), true)
	u, err := CreateDatabase(context.Background(), s.URL, "scratch")
	if err != nil {
		t.Fatal(err)
	}
	if got := query[string](t, u, "SELECT current_database()"); got != "scratch" {
		t.Fatalf("the URL reaches %s, want scratch", got)
	}
	exec1(t, u, "CREATE TABLE left_by_the_run_before (id int)")
	if u, err = CreateDatabase(context.Background(), s.URL, "scratch"); err != nil {
		t.Fatal(err)
	}
	if query[bool](t, u, "SELECT to_regclass('left_by_the_run_before') IS NOT NULL") {
		t.Error("the database made again holds the table of the one before")
	}
}
