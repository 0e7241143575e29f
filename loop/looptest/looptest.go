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

// Wait waits for the next n passes of p, and returns them.
func Wait(t testing.TB, p *loop.Passes, n int) []loop.Pass {
	t.Helper()
	return WaitFor(t, p, n, nil)
}

// WaitFor waits for the next n passes of p for which ok is true, and
// returns them. Call it on the test's goroutine: it fails the test with
// t.Fatalf.
func WaitFor(t testing.TB, p *loop.Passes, n int, ok func(loop.Pass) bool) []loop.Pass {
	t.Helper()
	return Await(t, p.Expect(n, ok))
}

// Await waits for the passes e expects, for a test that called Expect
// before it acted, and returns them.
func Await(t testing.TB, e *loop.Expected) []loop.Pass {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	got, err := e.Wait(ctx)
	if err != nil {
		t.Fatalf("waiting for passes: %v; those that came: %+v", err, got)
	}
	return got
}
