package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOrder_SwapsEachPairOnOddTurns(t *testing.T) {
	t.Parallel()
	legs := []leg{{pairedWithNext: true}, {}, {pairedWithNext: true}, {}, {}}
	require.Equal(t, []int{0, 1, 2, 3, 4}, order(legs, 0))
	require.Equal(t, []int{1, 0, 3, 2, 4}, order(legs, 1))
	require.Equal(t, []int{0, 1, 2, 3, 4}, order(legs, 2))
	require.Equal(t, []int{0, 1, 2}, order([]leg{{}, {}, {}}, 1), "unpaired legs keep their order")
}
