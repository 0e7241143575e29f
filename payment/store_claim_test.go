package payment

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// claimedAs is what one claim call gave.
type claimedAs struct {
	c   claim
	err error
}

// claimAll claims each of attempts, all at once.
func claimAll(s *store, attempts []Attempt) []claimedAs {
	return atOnce(len(attempts), func(i int) claimedAs {
		c, err := s.claim(context.Background(), attempts[i], SessionMaxAttemptsDefault)
		return claimedAs{c, err}
	})
}

// attemptsFor are new attempts of m for keys, for orders[i] when given.
func attemptsFor(m Merchant, keys []string, orders ...string) []Attempt {
	out := make([]Attempt, len(keys))
	for i, k := range keys {
		in := ChargeInput{Amount: 1999, Currency: "USD", PaymentMethod: "pm_card_visa"}
		if i < len(orders) {
			in.OrderID = orders[i]
		}
		out[i] = newChargeAttempt(m, k, in, time.Now(), time.Minute, time.Hour)
	}
	return out
}

// Claims that wait for a connection together are written together, in
// one statement and one commit, and each key comes back as its own claim
// would: claimed by this request, its stored attempt, or taken by another
// request of the same batch (not visible yet: read it again).
func TestClaims_WhatWaitsIsClaimedInOneCommit_EachKeyOnItsOwn(t *testing.T) {
	t.Parallel()
	pool, s, m := storeWithMerchant(t, "claim-batch")
	stored := claimAll(s, attemptsFor(m, []string{"stored"}))[0]
	require.NoError(t, stored.err)
	require.Equal(t, claimedByUs, stored.c.outcome)

	var keys []string
	for i := range 17 {
		keys = append(keys, fmt.Sprintf("k-%d", i))
	}
	keys = append(keys, "same", "same", "stored")
	rest := attemptsFor(m, keys)

	got := writtenTogether(t, pool, s.claims, len(rest), func() []claimedAs { return claimAll(s, rest) })
	var same []claimOutcome
	for i, g := range got {
		require.NoError(t, g.err, keys[i])
		switch keys[i] {
		case "same":
			same = append(same, g.c.outcome)
		case "stored":
			require.Equal(t, foundStored, g.c.outcome, "a key stored before is its stored attempt")
			require.Equal(t, stored.c.attempt.ID, g.c.attempt.ID)
		default:
			require.Equal(t, claimedByUs, g.c.outcome, keys[i])
			require.Equal(t, rest[i].ID, g.c.attempt.ID)
			require.Equal(t, keys[i], g.c.attempt.IdempotencyKey)
		}
	}
	require.ElementsMatch(t, []claimOutcome{claimedByUs, notVisibleYet}, same,
		"of two claims of one key in a batch, one claims it, the other reads it again")
	require.Equal(t, []int64{1}, dbtest.Query[int64](t, pool,
		"SELECT count(DISTINCT xmin::text) FROM charge_attempts WHERE idempotency_key <> 'stored'"),
		"the 18 keys claimed of the 20 claims that waited for a connection together, in one transaction")
	require.Equal(t, []int64{19}, dbtest.Query[int64](t, pool, "SELECT count(*) FROM charge_attempts"))
}

// A batch whose statement fails (two live attempts for one order: a
// unique violation for the whole statement) is claimed again one by one,
// so each gets its own answer: one of the two claims the order, the other
// is refused as the order's second payment, and the rest are claimed.
func TestClaims_AFailedBatch_IsClaimedAgainOneByOne(t *testing.T) {
	t.Parallel()
	pool, s, m := storeWithMerchant(t, "claim-fallback")
	rest := attemptsFor(m, []string{"o-a", "o-b", "x-1", "x-2"}, "order-1", "order-1")

	got := writtenTogether(t, pool, s.claims, len(rest), func() []claimedAs { return claimAll(s, rest) })
	var refused int
	for i, g := range got[:2] {
		if g.err != nil {
			require.ErrorIs(t, g.err, errOrderPaid)
			refused++
			continue
		}
		require.Equal(t, claimedByUs, g.c.outcome)
		require.Equal(t, rest[i].ID, g.c.attempt.ID)
	}
	require.Equal(t, 1, refused, "one of the order's two claims is refused")
	for i, g := range got[2:] {
		require.NoError(t, g.err)
		require.Equal(t, claimedByUs, g.c.outcome)
		require.Equal(t, rest[2+i].ID, g.c.attempt.ID)
	}
	require.Equal(t, []int64{3}, dbtest.Query[int64](t, pool, "SELECT count(DISTINCT xmin::text) FROM charge_attempts"),
		"each was claimed again in a transaction of its own")
}
