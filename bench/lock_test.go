package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A second run in the same data directory fails at once, naming the
// lock, while the first holds it; once the first ends, a run goes on.
func TestLockData_OneRunADataDirectory(t *testing.T) {
	data := t.TempDir()
	unlock, err := lockData(data)
	require.NoError(t, err)
	_, err = lockData(data)
	require.ErrorContains(t, err, "another bench run", "a second run while the first holds the lock")
	unlock()
	again, err := lockData(data)
	require.NoError(t, err, "a run after the first ended")
	again()
}
