package localpg

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

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
