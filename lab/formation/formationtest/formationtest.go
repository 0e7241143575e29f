// Package formationtest helps tests that run a pg_auto_failover formation
// (package formation): they need pg_autoctl, and a directory that
// PostgreSQL's unprivileged user can reach.
package formationtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Dir is a temporary directory for a formation, removed when the test ends.
// It skips the test under go test -short (a formation is several processes
// that take seconds to start), and when pg_autoctl is missing, except under
// CI=true, where .ci/run installs it and its absence is a failure.
func Dir(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a pg_auto_failover formation; skipped with -short")
	}
	if _, err := exec.LookPath("pg_autoctl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("pg_autoctl is missing; .ci/run installs postgresql-15-auto-failover and pg-auto-failover-cli")
		}
		t.Skip("pg_autoctl is missing: install postgresql-15-auto-failover and pg-auto-failover-cli")
	}
	dir := t.TempDir()
	// t.TempDir's directories are the test's own (0700); the formation's
	// keepers run as PostgreSQL's user.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
