// Package looptest waits, in a test, for the passes of a loop.Runner
// (loop.Passes), and fails the test when they do not come in time.
package looptest

import (
	"context"
	"testing"
	"time"

	"chargeonce/loop"
)

// Timeout bounds every wait: long enough for a loaded machine under -race,
// short enough that a pass that never comes fails the test rather than
// hanging it.
const Timeout = 30 * time.Second

// WaitFor waits for the next n passes of p for which ok is true, and
// returns them. Call it on the test's goroutine: it fails the test with
// t.Fatalf.
func WaitFor(t testing.TB, p *loop.Passes, n int, ok func(loop.Pass) bool) []loop.Pass {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	got, err := p.Wait(ctx, n, ok)
	if err != nil {
		t.Fatalf("waiting for passes: %v; those that came: %+v", err, got)
	}
	return got
}
