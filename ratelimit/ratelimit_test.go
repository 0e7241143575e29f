package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func withClock(l *Limiter) func(time.Duration) {
	now := time.Unix(1_700_000_000, 0)
	l.now = func() time.Time { return now }
	return func(d time.Duration) { now = now.Add(d) }
}

func TestLimiter_BurstThenRate(t *testing.T) {
	t.Parallel()
	l := New(2, 3, 0) // 2 a second, bursts of 3
	advance := withClock(l)
	for i := range 3 {
		ok, _ := l.Allow("m")
		require.True(t, ok, "burst request %d", i)
	}
	ok, wait := l.Allow("m")
	require.False(t, ok)
	require.Equal(t, 500*time.Millisecond, wait, "one token every 500ms")
	ok, _ = l.Allow("other")
	require.True(t, ok, "keys have buckets of their own")

	advance(499 * time.Millisecond)
	ok, _ = l.Allow("m")
	require.False(t, ok, "a refusal takes no token, and the next is not there yet")
	advance(time.Millisecond)
	ok, _ = l.Allow("m")
	require.True(t, ok)
}

func TestLimiter_ExhaustedPeeksWithoutTaking(t *testing.T) {
	t.Parallel()
	l := New(1, 2, 0)
	advance := withClock(l)
	exhausted, _ := l.Exhausted("ip")
	require.False(t, exhausted, "an unknown key has a full bucket")
	for range 2 {
		exhausted, _ = l.Exhausted("ip")
		require.False(t, exhausted)
		l.Allow("ip")
	}
	exhausted, wait := l.Exhausted("ip")
	require.True(t, exhausted)
	require.Equal(t, time.Second, wait)
	advance(time.Second)
	exhausted, _ = l.Exhausted("ip")
	require.False(t, exhausted)
}

func TestLimiter_RemembersBoundedKeys(t *testing.T) {
	t.Parallel()
	l := New(1, 1, 10)
	withClock(l)
	for i := range 1000 {
		l.Allow(fmt.Sprint(i))
	}
	require.Equal(t, 10, l.buckets.Len(), "memory stays bounded whatever keys callers invent")
}

func TestLimiter_NilAndZeroAllowEverything(t *testing.T) {
	t.Parallel()
	require.Nil(t, New(0, 10, 0))
	var l *Limiter
	ok, _ := l.Allow("x")
	require.True(t, ok)
	exhausted, _ := l.Exhausted("x")
	require.False(t, exhausted)
}

// TestLimiter_ConcurrentRefusals_NeverAdmitMoreThanTheBucket hammers one
// key from many goroutines while the clock moves: the admitted count stays
// within burst + rate × elapsed. (A limiter that reserves and then cancels
// the refused reservations hands back more tokens than it took, and admits
// too many.)
func TestLimiter_ConcurrentRefusals_NeverAdmitMoreThanTheBucket(t *testing.T) {
	t.Parallel()
	l := New(100, 10, 0)
	start := time.Unix(1_700_000_000, 0)
	var ticks atomic.Int64
	l.now = func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * 10 * time.Microsecond) }
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 5000 {
				if ok, _ := l.Allow("m"); ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Duration(ticks.Load()) * 10 * time.Microsecond
	ceiling := 10 + int64(elapsed.Seconds()*100) + 1
	t.Logf("%d admitted over %s of clock (ceiling %d)", admitted.Load(), elapsed, ceiling)
	require.LessOrEqual(t, admitted.Load(), ceiling)
	require.GreaterOrEqual(t, admitted.Load(), ceiling-5, "and it does not refuse what the bucket holds")
}

func TestLimiter_GiveBack_ReturnsExactlyTheTokenTaken(t *testing.T) {
	t.Parallel()
	l := New(0.001, 3, 0) // next to no refill: the bucket is what Allow and GiveBack leave
	withClock(l)
	for range 3 {
		ok, _ := l.Allow("ip")
		require.True(t, ok)
	}
	ok, _ := l.Allow("ip")
	require.False(t, ok, "empty")
	l.GiveBack("ip")
	ok, _ = l.Allow("ip")
	require.True(t, ok, "the token given back is there")
	ok, _ = l.Allow("ip")
	require.False(t, ok, "and only that one")

	// A full bucket stays at its burst, however much is given back.
	l.GiveBack("fresh") // never seen: nothing to give back to
	for range 10 {
		l.GiveBack("ip")
	}
	for i := range 3 {
		ok, _ := l.Allow("ip")
		require.True(t, ok, "token %d of the burst", i)
	}
	ok, _ = l.Allow("ip")
	require.False(t, ok, "never more than the burst")
}

func TestLimiter_TakeAndGiveBackConcurrently_NeverMoreThanTheBurstAtOnce(t *testing.T) {
	t.Parallel()
	l := New(0.001, 10, 0)
	withClock(l)
	// 100 goroutines each take a token, hold it, and give it back: at no
	// time do more than 10 hold one.
	var holding, most atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			for range 20 {
				if ok, _ := l.Allow("ip"); !ok {
					continue
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				holding.Add(-1)
				l.GiveBack("ip")
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, most.Load(), int32(10))
	require.Positive(t, most.Load())
	for range 10 {
		ok, _ := l.Allow("ip")
		require.True(t, ok, "every token came back")
	}
}

// A caller that read the clock before another, and reached the bucket
// after it, set the bucket's time back (x/time/rate keeps the time of the
// last admission, even an earlier one), and the next caller was given the
// same interval's tokens again. Played in that order: at 2 a burst and 1 a
// second, four callers at 0, 0.5 s (late), 1 s and 1.5 s may take 3.
func TestLimiter_ACallerLateToTheBucket_GivesNoTokenTwice(t *testing.T) {
	t.Parallel()
	l := New(1, 2, 0)
	start := time.Unix(1_700_000_000, 0)
	aRead, bDone := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	l.now = func() time.Time {
		switch calls.Add(1) {
		case 1:
			return start
		case 2: // A: reads 0.5 s, then is slow to reach the bucket
			close(aRead)
			select {
			case <-bDone:
			case <-time.After(200 * time.Millisecond): // B may be waiting for A
			}
			return start.Add(500 * time.Millisecond)
		case 3: // B
			return start.Add(time.Second)
		default:
			return start.Add(1500 * time.Millisecond)
		}
	}
	var admitted atomic.Int64
	allow := func() {
		if ok, _ := l.Allow("m"); ok {
			admitted.Add(1)
		}
	}
	allow()
	var wg sync.WaitGroup
	wg.Go(allow) // A
	wg.Go(func() { <-aRead; allow(); close(bDone) })
	wg.Wait()
	allow()
	require.Equal(t, int64(3), admitted.Load(), "2 + 1.5 s at 1 a second: 3 tokens, not 4")
}
