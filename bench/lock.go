package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockData takes DATA/bench.lock for the run, or fails at once when
// another run holds it: a second run in the same data directory would
// remove the first's PostgreSQL and its servers' data under it, and the
// first, ending, would stop the second's PostgreSQL, each run's figures
// spoiled without a word. The kernel drops the lock if the run dies.
func lockData(data string) (unlock func(), err error) {
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(data, "bench.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another bench run is using %s (it holds %s): wait for it to end, or give this one -data", data, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
