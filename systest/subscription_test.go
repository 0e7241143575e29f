package systest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/graph/graphtest"
	"chargeonce/internal/apiclient"
)

// TestShutdown_ClosesOpenSubscriptions sends SIGTERM to a server that holds
// a subscription open over a websocket and another over server-sent
// events: both end, and the process exits cleanly well within its 30 s
// shutdown, instead of waiting for the streams.
func TestShutdown_ClosesOpenSubscriptions(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t), "RECONCILE_INTERVAL": "1h"})
	// The provider charged and lost its answer, and the request handed the
	// attempt on: it stays PROCESSING, and its subscriptions stay open.
	key := newKey()
	require.Equal(t, apiclient.Processing, s.chargeCard(t, apiclient.DemoAPIKey, key, withPaymentMethod("pm_card_lostResponse")).Status)
	ws := graphtest.SubscribeWS(t, s.URL, apiclient.DemoAPIKey, key)
	first := ws.Next(t, "1")
	require.Empty(t, first.Errors)
	require.Equal(t, apiclient.Processing, first.Result.Status)
	sse := graphtest.SubscribeSSE(t, s.HTTP, s.URL, apiclient.DemoAPIKey, key)
	streamed := sse.MustNext(t)
	require.Empty(t, streamed.Errors)
	require.Equal(t, apiclient.Processing, streamed.Result.Status)

	requireStopsCleanly(t, s.Process, 20*time.Second, "the shutdown does not wait out its 30 s for the streams")
	_, err := ws.Read(t)
	require.Error(t, err, "the websocket is closed")
	require.False(t, errors.Is(err, context.DeadlineExceeded), "closed, not left open: %v", err)
	last, err := sse.Next(t)
	require.False(t, last.Complete, "a complete event would tell the client that nothing more will come")
	require.Error(t, err, "the event stream ends without a complete event: the client knows to ask again")
}
