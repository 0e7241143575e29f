package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommittedFiles_AreWhatItWrites fails, like make check-generated, when
// graph's list changed and make generate was not run: go test alone
// catches it.
func TestCommittedFiles_AreWhatItWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, run(dir))
	for _, name := range []string{TSFile, GoFile} {
		want, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		committed, err := os.ReadFile(filepath.Join("..", "..", name))
		require.NoError(t, err)
		require.Equal(t, string(want), string(committed), "%s is stale: run make generate", name)
	}
}
