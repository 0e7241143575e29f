package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/events/eventstest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/cli"
	"chargeonce/internal/listening"
	"chargeonce/internal/testlog"
)

func TestMain(m *testing.M) {
	code := m.Run()
	eventstest.StopShared()
	os.Exit(code)
}

// TestRun_Serve_ListensAnnouncesAndDrains runs the server as main does, in
// process, on a port of its own choosing: it says where it listens, it is
// ready, it charges, and once its context ends it drains and returns. The
// process-level shutdown (a SIGTERM with charges in flight) is systest's.
func TestRun_Serve_ListensAnnouncesAndDrains(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbtest.NewDatabase(t), "PORT": "0", "NATS_URL": eventstest.Shared(t).URL(),
		"METRICS_ADDR": "127.0.0.1:0"}
	var logs testlog.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"chargeonce", "serve"}, func(k string) string { return env[k] }, &logs, &logs)
	}()

	var addrs listening.Addrs
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		found := false
		for line := range strings.Lines(logs.String()) {
			if a, ok := listening.Parse(line); ok {
				addrs, found = a, true
			}
		}
		require.True(c, found, "the server says where it listens")
	}, time.Minute, 10*time.Millisecond, "%s", &logs)
	require.NotEmpty(t, addrs.Metrics, "METRICS_ADDR is announced with the API")
	api := apiclient.New(addrs.Loopback(), apiclient.DemoAPIKey, nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.NoError(c, api.Ready(ctx)) }, 30*time.Second, 20*time.Millisecond)
	res, err := api.ChargeCard(ctx, "run-serve", apiclient.ChargeCardInput{Amount: new(100), Currency: new("USD"), PaymentMethod: "pm_card_visa"})
	require.NoError(t, err)
	require.Equal(t, apiclient.Succeeded, res.Status)
	resp, err := http.Get(addrs.Metrics)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the metrics listener serves /metrics")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("run did not return after its context ended")
	}
	require.Contains(t, logs.String(), "stopped")
}

// TestRun_NoCommand_IsTheUsage: with no command, or one it does not know,
// run answers cli.ErrUsage (main prints it and exits 2); help prints it.
func TestRun_NoCommand_IsTheUsage(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	for _, args := range [][]string{{"chargeonce"}, {"chargeonce", "bogus"}, {"chargeonce", "cluster", "up"}, {"chargeonce", "chaos"}} {
		require.ErrorIs(t, run(context.Background(), args, none, &strings.Builder{}, &strings.Builder{}), cli.ErrUsage, "%v", args)
	}
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"chargeonce", "help"}, none, &out, &out))
	require.Equal(t, cli.ErrUsage.Error()+"\n", out.String())
}
