package graph

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The storm is on while most of the recent requests were replays, off
// while most were not, and stays within its window however many saw it.
func TestStorm_OnWhileMostRecentRequestsAreReplays(t *testing.T) {
	var s storm
	for range 100 {
		s.saw(false)
	}
	require.False(t, s.on(), "fresh charges only")
	for range 100 {
		s.saw(true)
		s.saw(false)
	}
	require.False(t, s.on(), "as many fresh charges as replays")
	for range stormWindow/2 - 1 {
		s.saw(true)
	}
	require.False(t, s.on())
	s.saw(true)
	require.True(t, s.on(), "half the window more replays than fresh charges")
	for range 100 {
		s.saw(true)
		s.saw(true)
		s.saw(false)
	}
	require.True(t, s.on(), "two replays for every fresh charge")
	turns := 0
	for s.on() {
		s.saw(true)
		s.saw(false)
		s.saw(false)
		turns++
	}
	require.LessOrEqual(t, turns, stormWindow/2+1, "one replay for two fresh charges ends it within the window")

	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 100 {
				s.saw(true)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int32(stormWindow), s.n.Load(), "bounded above")
	for range 64 {
		wg.Go(func() {
			for range 100 {
				s.saw(false)
			}
		})
	}
	wg.Wait()
	require.Zero(t, s.n.Load(), "bounded below")
}
