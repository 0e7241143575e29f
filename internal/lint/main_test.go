package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// repo makes a git repository that tracks files (name → content).
func repo(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	git("init", "-q")
	for name, content := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, content, 0o644))
		git("add", name)
	}
	return dir
}

func TestRun_SourcesOnly_Passes(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string][]byte{
		"main.go":                               []byte("package main\n"),
		"empty":                                 {},
		"web-demo/screenshots/checkout-big.png": make([]byte, MaxFileBytes+1),
	})
	require.NoError(t, run(dir))
}

func TestRun_TrackedBinary_Fails(t *testing.T) {
	t.Parallel()
	// The ELF magic and some of a header: what go build leaves at the root.
	elf := append([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1}, make([]byte, 64)...)
	for name, files := range map[string]map[string][]byte{
		"an ELF file at the root":    {"chargeonce": elf, "main.go": []byte("package main\n")},
		"an ELF file among pictures": {"web-demo/screenshots/x.png": elf},
		"a large file":               {"bench/results/dump.json": make([]byte, MaxFileBytes+1)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := run(repo(t, files))
			require.Error(t, err)
			for f := range files {
				if f != "main.go" {
					require.ErrorContains(t, err, f)
				}
			}
			require.NotContains(t, err.Error(), "main.go")
		})
	}
}

func TestRun_ThisRepository_Passes(t *testing.T) {
	t.Parallel()
	require.NoError(t, run("../.."), "a build output is tracked in this repository")
}

func TestRun_QueriesOutsideAStore_Fail(t *testing.T) {
	t.Parallel()
	imports := func(pkg string, paths ...string) []byte {
		src := "package " + pkg + "\n\nimport (\n"
		for _, p := range paths {
			src += "\t_ \"" + p + "\"\n"
		}
		return []byte(src + ")\n")
	}
	dir := repo(t, map[string][]byte{
		"go.mod": []byte("module chargeonce\n\ngo 1.26\n"),
		// A store's files and their tests may.
		"payment/store.go":            imports("payment", "chargeonce/sqlc"),
		"payment/store_attempt.go":    imports("payment", "chargeonce/sqlc"),
		"payment/store_test.go":       imports("payment", "chargeonce/sqlc"),
		"cardsim/refund_store.go":     imports("cardsim", "chargeonce/cardsim/internal/sqlc"),
		"sqlc/db.go":                  imports("sqlc", "github.com/jackc/pgx/v5"),
		"graph/other.go":              imports("graph", "chargeonce/sqlcx", "example.com/sqlc", "chargeonce/payment"),
		"docs/sqlc.md":                []byte("import \"chargeonce/sqlc\"\n"),
		"payment/restore.go":          imports("payment", "chargeonce/sqlc"),
		"graph/resolver.go":           imports("graph", "chargeonce/sqlc"),
		"cardsim/charges.go":          imports("cardsim", "chargeonce/cardsim/internal/sqlc"),
		"payment/settle_test.go":      imports("payment", "chargeonce/sqlc"),
		"payment/storehouse/house.go": imports("storehouse", "chargeonce/sqlc"),
	})
	err := run(dir)
	require.Error(t, err)
	for _, bad := range []string{
		"payment/restore.go imports chargeonce/sqlc",
		"graph/resolver.go imports chargeonce/sqlc",
		"cardsim/charges.go imports chargeonce/cardsim/internal/sqlc",
		"payment/settle_test.go imports chargeonce/sqlc",
		"payment/storehouse/house.go imports chargeonce/sqlc",
	} {
		require.ErrorContains(t, err, bad)
	}
	for _, good := range []string{"payment/store.go", "payment/store_attempt.go", "payment/store_test.go",
		"cardsim/refund_store.go", "sqlc/db.go", "graph/other.go", "docs/sqlc.md"} {
		require.NotContains(t, err.Error(), "  "+good+" ")
	}
	require.NotContains(t, err.Error(), "build outputs", "no build output is tracked")
}

func TestRun_LinksThatLeadNowhere_Fail(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string][]byte{
		"README.md": []byte("# Title\n\n" +
			"[a file](docs/a.md), [a heading](docs/a.md#customer-authentication-3-d-secure), [the second Run it](docs/a.md#run-it-1),\n" +
			"[here](#title), [a folder](docs/), ![a picture](docs/pic.png), [a site](https://example.com/nope.md), [mail](mailto:x@example.com)\n" +
			"`[in code](nope.md)`\n\n```\n[in a fence](nope.md)\n```\n\n" +
			"[gone](docs/gone.md), [moved](docs/a.md#refunds), [no such](#nowhere)\n"),
		"docs/a.md":    []byte("# A\n\n## Customer authentication (3-D Secure)\n\n## Run it\n\n## Run it\n\n[back](../README.md#title), [up](../README.md#up)\n"),
		"docs/pic.png": {0x89, 'P', 'N', 'G'},
	})
	err := run(dir)
	require.Error(t, err)
	msg := err.Error()
	for _, broken := range []string{
		"README.md links to docs/gone.md, which is not in the repository",
		"README.md links to docs/a.md#refunds, but docs/a.md has no heading #refunds",
		"README.md links to #nowhere, but README.md has no heading #nowhere",
		"docs/a.md links to ../README.md#up, but README.md has no heading #up",
	} {
		require.Contains(t, msg, broken)
	}
	for _, fine := range []string{"docs/a.md,", "#customer-authentication-3-d-secure", "#run-it-1", "#title", "docs/,",
		"docs/pic.png", "example.com", "mailto", "in code", "in a fence", "nope.md"} {
		require.NotContains(t, msg, fine)
	}
	require.Equal(t, 4, strings.Count(msg, " links to "), msg)
}
