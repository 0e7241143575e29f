package loop

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Pass is what one pass of a Runner came to.
type Pass struct {
	Next Next
	Err  error
}

// Passes is a Runner's test signal, in the manner of River's maintenance
// TestSignals: it tells of each pass the runner finishes, so that a test
// waits for "two passes" and then asserts what they did or left alone,
// rather than sleeping and hoping a pass ran. A nil *Passes tells nobody;
// one nobody waits on costs a lock per pass and keeps nothing.
type Passes struct {
	mu       sync.Mutex
	count    int
	expected []*Expected
}

// Expected counts the passes that finish after Passes.Expect, until it
// has what it waits for.
type Expected struct {
	p    *Passes
	n    int
	ok   func(Pass) bool
	got  []Pass // guarded by p.mu
	done chan struct{}
}

// report tells p's expectations of a finished pass.
func (p *Passes) report(pass Pass) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	waiting := p.expected[:0]
	for _, e := range p.expected {
		if e.ok == nil || e.ok(pass) {
			e.got = append(e.got, pass)
		}
		if len(e.got) >= e.n {
			close(e.done)
			continue
		}
		waiting = append(waiting, e)
	}
	clear(p.expected[len(waiting):])
	p.expected = waiting
}

// Count says how many passes have finished so far.
func (p *Passes) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// Expect starts counting the passes that finish from now on for which ok
// is true (nil: every pass), up to n of them. A pass under way counts when
// it finishes; to be sure of a pass that started after now, expect two.
// Expecting before acting leaves no pass unseen: the first pass of a
// runner started after Expect is counted.
func (p *Passes) Expect(n int, ok func(Pass) bool) *Expected {
	e := &Expected{p: p, n: n, ok: ok, done: make(chan struct{})}
	if n <= 0 {
		close(e.done)
		return e
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expected = append(p.expected, e)
	return e
}

// Wait waits for the n passes Expect counts and returns them, or returns
// those it has with ctx's error when ctx ends first.
func (e *Expected) Wait(ctx context.Context) ([]Pass, error) {
	select {
	case <-e.done:
		return e.passes(), nil
	case <-ctx.Done():
	}
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	select {
	case <-e.done: // it came meanwhile
		return e.got, nil
	default:
	}
	e.p.expected = slices.DeleteFunc(e.p.expected, func(x *Expected) bool { return x == e })
	return e.got, fmt.Errorf("%d of %d passes: %w", len(e.got), e.n, ctx.Err())
}

// passes is what e got, once it is done.
func (e *Expected) passes() []Pass {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	return e.got
}

// Wait is Expect and its Wait at once: the next n passes for which ok is
// true.
func (p *Passes) Wait(ctx context.Context, n int, ok func(Pass) bool) ([]Pass, error) {
	return p.Expect(n, ok).Wait(ctx)
}
