package payment

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db"
	"chargeonce/db/dbtest"
)

// claimed claims n attempts of m, keys prefix-0 … prefix-(n-1).
func claimed(t *testing.T, s *store, m Merchant, prefix string, n int) []Attempt {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	out := attemptsFor(m, keys)
	for i, a := range out {
		c, err := s.claim(context.Background(), a, SessionMaxAttemptsDefault)
		require.NoError(t, err)
		require.Equal(t, claimedByUs, c.outcome)
		out[i] = c.attempt
	}
	return out
}

// succeeded is what one succeed call gave.
type succeeded struct {
	a   Attempt
	err error
}

// succeedAll records each of attempts as charged by providerIDs[i] under
// ctxs[i], all at once, and returns what each call gave.
func succeedAll(s *store, ctxs []context.Context, attempts []Attempt, providerIDs []string) []succeeded {
	return atOnce(len(attempts), func(i int) succeeded {
		done, _, err := s.succeed(ctxs[i], attempts[i], providerIDs[i], chargeDetail{}, nil, time.Now(), time.Now().Add(time.Hour))
		return succeeded{done, err}
	})
}

// Recordings that wait for a connection together are written together,
// in one statement and one commit, and each keeps its own fence: one
// holder's stale fence leaves its attempt alone, the others are recorded,
// each with its charge and its one event.
func TestRecordings_WhatWaitsIsWrittenInOneCommit_EachFencedOnItsOwn(t *testing.T) {
	t.Parallel()
	pool, s, m := storeWithMerchant(t, "record-batch")
	attempts := claimed(t, s, m, "k", 21)
	stale := attempts[7]
	stale.Fence++
	attempts[7] = stale
	providerIDs := make([]string, len(attempts))
	for i := range providerIDs {
		providerIDs[i] = fmt.Sprintf("ch_batch_%d", i)
	}

	got := writtenTogether(t, pool, s.recordings, len(attempts), func() []succeeded { return succeedAll(s, background(len(attempts)), attempts, providerIDs) })
	for i, g := range got {
		if i == 7 {
			require.ErrorIs(t, g.err, errFenced, "a stale fence in a batch writes nothing")
			continue
		}
		require.NoError(t, g.err, "attempt %d", i)
		require.Equal(t, StatusSucceeded, g.a.Status)
		require.Equal(t, providerIDs[i], g.a.charge().Charge.ProviderChargeID)
		require.Equal(t, attempts[i].ID, g.a.ID)
	}
	require.Equal(t, []string{"PROCESSING"}, dbtest.Query[string](t, pool, "SELECT status FROM charge_attempts WHERE id = $1", stale.ID))
	require.Equal(t, []int64{20, 20}, dbtest.Query[int64](t, pool,
		"SELECT count(*) FROM charges UNION ALL SELECT count(*) FROM charge_events WHERE type = 'charge.succeeded'"))
	require.Equal(t, []int64{20}, dbtest.Query[int64](t, pool,
		"SELECT count(*) FROM charge_events e JOIN charge_attempts a ON a.id = e.attempt_id AND a.charge_id = e.charge_id JOIN charges c ON c.id = e.charge_id"),
		"each event names its own attempt and charge")
	require.Equal(t, []int64{1}, dbtest.Query[int64](t, pool, "SELECT count(DISTINCT xmin::text) FROM charges"),
		"the 21 recordings that waited for a connection together (one fenced out) committed in one transaction")
}

// A batch whose statement fails (two recordings of one provider charge: a
// unique violation for the whole statement) is written again one by one,
// so each gets its own answer: the first of the two is recorded, the
// other is fenced out, and the rest are recorded.
func TestRecordings_AFailedBatch_IsWrittenAgainOneByOne(t *testing.T) {
	t.Parallel()
	pool, s, m := storeWithMerchant(t, "record-fallback")
	attempts := claimed(t, s, m, "k", 5)
	providerIDs := []string{"ch_a", "ch_dup", "ch_b", "ch_dup", "ch_c"}

	got := writtenTogether(t, pool, s.recordings, len(attempts), func() []succeeded { return succeedAll(s, background(len(attempts)), attempts, providerIDs) })
	var fenced []int
	for i, g := range got {
		if g.err != nil {
			require.ErrorIs(t, g.err, errFenced)
			fenced = append(fenced, i)
			continue
		}
		require.Equal(t, providerIDs[i], g.a.charge().Charge.ProviderChargeID)
	}
	require.Len(t, fenced, 1, "one of the two recordings of ch_dup is fenced out")
	require.Contains(t, []int{1, 3}, fenced[0])
	require.ElementsMatch(t, []string{"ch_a", "ch_dup", "ch_b", "ch_c"},
		dbtest.Query[string](t, pool, "SELECT provider_charge_id FROM charges"))
	require.Equal(t, []int64{4}, dbtest.Query[int64](t, pool, "SELECT count(*) FROM charge_events"))
	require.Equal(t, []int64{4}, dbtest.Query[int64](t, pool, "SELECT count(DISTINCT xmin::text) FROM charges"),
		"each was written again in a transaction of its own")
}

// A request that gives up while its recording waits for a connection
// gets its context's error, marked as sent nowhere (db.ErrNotSent): its
// attempt stays PROCESSING, for the reconciler, and the recordings that
// waited beside it are written without it.
func TestRecordings_ACallerThatGivesUpWhileWaiting_SendsNothing(t *testing.T) {
	t.Parallel()
	pool, s, m := storeWithMerchant(t, "record-give-up")
	attempts := claimed(t, s, m, "k", 4)
	providerIDs := []string{"ch_0", "ch_1", "ch_2", "ch_3"}

	giveUp, cancel := context.WithCancel(context.Background())
	ctxs := []context.Context{context.Background(), giveUp, context.Background(), context.Background()}
	got := writtenTogether(t, pool, s.recordings, 4, func() []succeeded { return succeedAll(s, ctxs, attempts, providerIDs) },
		func() { cancel(); waiting(t, s.recordings, 3) })

	require.ErrorIs(t, got[1].err, context.Canceled)
	require.ErrorIs(t, got[1].err, db.ErrNotSent)
	for _, i := range []int{0, 2, 3} {
		require.NoError(t, got[i].err)
	}
	require.Equal(t, []string{"PROCESSING"}, dbtest.Query[string](t, pool, "SELECT status FROM charge_attempts WHERE id = $1", attempts[1].ID))
	require.ElementsMatch(t, []string{"ch_0", "ch_2", "ch_3"}, dbtest.Query[string](t, pool, "SELECT provider_charge_id FROM charges"))
	require.Equal(t, []int64{1}, dbtest.Query[int64](t, pool, "SELECT count(DISTINCT xmin::text) FROM charges"))
}

// Many charges recorded at once, with nothing held: each is recorded
// once, with its own charge and event, however they were batched.
func TestRecordings_ManyConcurrentCharges_EachRecordedOnce(t *testing.T) {
	t.Parallel()
	pool, s, m := storeWithMerchant(t, "record-many")
	attempts := claimed(t, s, m, "k", 300)
	providerIDs := make([]string, len(attempts))
	for i := range providerIDs {
		providerIDs[i] = "ch_many_" + uuid.NewString()
	}
	got := succeedAll(s, background(len(attempts)), attempts, providerIDs)
	for i, g := range got {
		require.NoError(t, g.err, "attempt %d", i)
		require.Equal(t, providerIDs[i], g.a.charge().Charge.ProviderChargeID)
	}
	require.ElementsMatch(t, providerIDs, dbtest.Query[string](t, pool, "SELECT provider_charge_id FROM charges"))
	require.Equal(t, []int64{300}, dbtest.Query[int64](t, pool,
		"SELECT count(DISTINCT attempt_id) FROM charge_events WHERE type = 'charge.succeeded'"))
	require.Equal(t, []int64{300}, dbtest.Query[int64](t, pool, "SELECT count(*) FROM charge_events_unsent"))
	t.Logf("300 recordings in %d transactions", dbtest.Query[int64](t, pool, "SELECT count(DISTINCT xmin::text) FROM charges")[0])
}

// Two recordings that wait for a connection together are not worth a
// batch: each is written on the connection it gets, in a transaction of
// its own.
func TestRecordings_TwoWaiting_GoOneByOne(t *testing.T) {
	t.Parallel()
	pool, s, m := storeWithMerchant(t, "record-two")
	attempts := claimed(t, s, m, "k", 2)
	providerIDs := []string{"ch_0", "ch_1"}

	got := writtenTogether(t, pool, s.recordings, 2, func() []succeeded { return succeedAll(s, background(2), attempts, providerIDs) })

	for _, g := range got {
		require.NoError(t, g.err)
	}
	require.Equal(t, []int64{2}, dbtest.Query[int64](t, pool, "SELECT count(DISTINCT xmin::text) FROM charges"))
}
