package main

import (
	"os"
	"os/exec"
	"path/filepath"
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
