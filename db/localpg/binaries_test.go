package localpg

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFindBinaries(t *testing.T) {
	dir, err := findBinaries()
	if err != nil {
		t.Skip(err) // no PostgreSQL server installed: nothing to find
	}
	if !hasBinaries(dir) {
		t.Errorf("%s lacks initdb, pg_ctl or postgres", dir)
	}

	t.Setenv("PATH", t.TempDir())
	if _, err := findBinaries(); err == nil {
		// Only possible where /usr/lib/postgresql or /usr/local/pgsql exist.
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
		if _, statErr := os.Stat("/usr/local/pgsql/bin/pg_ctl"); len(matches) == 0 && statErr != nil {
			t.Error("found binaries outside the places searched")
		}
	}
	e := (&noBinariesError{tried: []string{"/x"}}).Error()
	for _, want := range []string{"apt-get install postgresql", "DATABASE_URL"} {
		if !strings.Contains(e, want) {
			t.Errorf("error %q lacks %q", e, want)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	dirs := []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/10/bin"}
	slices.SortFunc(dirs, func(a, b string) int { return compareVersions(b, a) })
	if dirs[0] != "/usr/lib/postgresql/17/bin" || dirs[2] != "/usr/lib/postgresql/9.6/bin" {
		t.Errorf("newest first: %v", dirs)
	}
}
