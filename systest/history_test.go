package systest

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// The history of a key (issue: "was I charged twice?"), seen from outside:
// through the API and `charges show`, after a storm and after a crash.

// historyTypes are the types of rows, in order.
func historyTypes(rows []apiclient.HistoryRow) []string {
	types := make([]string, len(rows))
	for i, r := range rows {
		types[i] = r.Type
	}
	return types
}

func TestHistory_StormOfTwoHundred_OneClaimOneCountedReplayRow(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL, "INSTANCE_NAME": "storm-1"})
	key := newKey()
	in := withPaymentMethod("pm_card_slow") // 300 ms at the provider: the storm meets it in flight

	// Two waves of a hundred: the first while the charge is in flight, the
	// second once it is final.
	const n = 200
	var mu sync.Mutex
	statuses := map[string]int{}
	replays := 0
	wave := func() {
		var wg sync.WaitGroup
		for range n / 2 {
			wg.Go(func() {
				r, err := s.demo().ChargeCard(t.Context(), key, in)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				statuses[string(r.Status)]++
				if r.Replayed {
					replays++
				}
			})
		}
		wg.Wait()
	}
	wave()
	require.Equal(t, "SUCCEEDED", s.finalStatus(t, key, 10*time.Second).Status)
	wave()
	require.Equal(t, 1, len(s.providerCharges(t, key)), "charged once")
	require.GreaterOrEqual(t, replays, n/2, "the second wave is all replays")

	rows, err := s.demo().History(t.Context(), apiclient.AttemptKindCharge, key)
	require.NoError(t, err)
	require.Len(t, historyOf(rows, "request.claimed"), 1, "one request claimed the key")
	counted := 0
	for _, typ := range []string{"request.processing", "request.replayed"} {
		got := historyOf(rows, typ)
		require.LessOrEqual(t, len(got), 1, "%s is one counted row", typ)
		if len(got) == 1 {
			counted += got[0].Count
			require.False(t, got[0].LastAt.Before(got[0].At))
		}
	}
	require.Equal(t, n-1, counted, "every other request counted: %v", statuses)
	if p := historyOf(rows, "request.processing"); len(p) == 1 {
		require.Equal(t, statuses["PROCESSING"], p[0].Count, "each PROCESSING answer counted")
	}
	replayed := historyOf(rows, "request.replayed")
	require.Len(t, replayed, 1, "the replays are one counted row")
	require.Equal(t, replays, replayed[0].Count, "each replay counted")
	for _, r := range rows {
		if r.Type == "event.published" {
			require.Nil(t, r.Instance, "the relay's publication is read from the outbox")
			continue
		}
		require.Equal(t, "storm-1", *r.Instance, r.Type)
	}

	// The operator's timeline says the same.
	show := runCommand(t, map[string]string{"DATABASE_URL": dbURL}, "charges", "show", key)
	show.requireOK(t)
	require.Contains(t, show.stdout, "merchant demo, charge key "+key)
	require.Equal(t, 1, strings.Count(show.stdout, " request.claimed "), show.stdout)
	require.Regexp(t, regexp.MustCompile(`request\.(replayed|processing) ×\d+`), show.stdout)
	require.Contains(t, show.stdout, " attempt.finalized ")
	t.Logf("charges show %s:\n%s", key, show.stdout)
}

func TestHistory_KilledAfterTheProvider_TheOtherInstanceTakesOverAndSaysSo(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	provider := startServer(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h", "INSTANCE_NAME": "provider"})
	providerURL := provider.URL + "/provider"
	env := map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": providerURL}
	doomed := map[string]string{"INSTANCE_NAME": "doomed"}
	for k, v := range env {
		doomed[k] = v
	}
	key := chargeUntilCrash(t, doomed, crashCase{crashAt: "after-provider", paymentMethod: "pm_card_visa"})

	survivorEnv := map[string]string{"INSTANCE_NAME": "survivor"}
	for k, v := range env {
		survivorEnv[k] = v
	}
	survivor := startServer(t, survivorEnv)
	require.Equal(t, "SUCCEEDED", survivor.finalStatus(t, key, 15*time.Second).Status)

	var rows []apiclient.HistoryRow
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		rows, err = survivor.demo().History(t.Context(), apiclient.AttemptKindCharge, key)
		require.NoError(c, err)
		require.NotEmpty(c, historyOf(rows, "event.published"))
	}, 15*time.Second, 50*time.Millisecond)
	types := historyTypes(rows)
	require.Equal(t, []string{"request.claimed", "provider.sent", "lease.ended", "lease.taken_over", "provider.read",
		"attempt.finalized", "event.written", "event.published"}, types[:8])
	require.Equal(t, "doomed", *rows[0].Instance, "the claim is the killed instance's")
	require.Equal(t, "doomed", *rows[1].Instance)
	require.Contains(t, *rows[1].Detail, "holder 1 sends under provider key chargeonce_")
	for _, r := range rows[3:6] {
		require.Equal(t, "survivor", *r.Instance, "%s is the survivor's", r.Type)
	}
	require.Contains(t, *rows[3].Detail, "by the reconciler: holder 2")
	require.Contains(t, *rows[4].Detail, "succeeded (")
	require.Contains(t, *rows[5].Detail, "by the reconciler")
	require.Equal(t, "SUCCEEDED", *rows[5].Status)
	require.Nil(t, rows[5].RequestId, "no request finished it")
	require.NotNil(t, rows[0].RequestId, "the claim names its request")

	show := runCommand(t, map[string]string{"DATABASE_URL": dbURL}, "charges", "show", key)
	show.requireOK(t)
	t.Logf("charges show %s:\n%s", key, show.stdout)
	require.Contains(t, show.stdout, "lease.taken_over")
}

func TestHistory_PublishableKey_IsRefused(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t)})
	key := newKey()
	s.chargeCard(t, apiclient.DemoAPIKey, key, visa(100))
	_, err := s.client(demoPublishableKey).History(t.Context(), apiclient.AttemptKindCharge, key)
	require.Equal(t, "FORBIDDEN", onlyCode(err))
	rows, err := s.demo().History(t.Context(), apiclient.AttemptKindCharge, key)
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	none, err := s.demo().History(t.Context(), apiclient.AttemptKindRefund, key)
	require.NoError(t, err)
	require.Empty(t, none, "a charge's key has no refund history")
}
