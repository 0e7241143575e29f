package systest

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/localpg"
	"chargeonce/internal/proc"
)

// TestServe_FirstRun_NamesThePagesAndStopsCleanlyOnCtrlC is a newcomer's
// first run, as make run starts it: a development server with no
// DATABASE_URL nor NATS_URL, so that it starts a project-local PostgreSQL
// and embeds its broker. Its "try it" line names the demo checkout and the
// playground, both answer there, and a Ctrl-C (SIGINT to its process
// group, as a terminal sends it) stops it with exit status 0, so that make
// reports no error, and stops the PostgreSQL it started.
func TestServe_FirstRun_NamesThePagesAndStopsCleanlyOnCtrlC(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dataDir := postgresDir(t)
	pgDir := filepath.Join(dataDir, "postgres")
	p, err := proc.Start(binary(t), proc.Options{Args: []string{"serve"}, Group: true, Env: map[string]string{
		"APP_ENV": "development", "PORT": "0", "DATA_DIR": dataDir,
		"DATABASE_URL": "", "NATS_URL": "", "EMBEDDED_NATS_PORT": "0",
	}})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Errorf("kill chargeonce serve: %v", err)
		}
		if err := localpg.Stop(context.Background(), pgDir); err != nil {
			t.Errorf("stop the project-local PostgreSQL: %v", err)
		}
		if t.Failed() {
			t.Logf("output of chargeonce serve (pid %d, %s):\n%s", p.PID(), p.State(), p.Output())
		}
	})
	addrs, err := p.Listening(t.Context(), 2*time.Minute)
	require.NoError(t, err)
	httpClient := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(httpClient.CloseIdleConnections)

	tryIt := regexp.MustCompile(`msg="try it" demo=(\S+) playground=(\S+)`)
	waitLogged(t, p, tryIt, 10*time.Second)
	m := tryIt.FindStringSubmatch(p.Output())
	port := mustURL(t, addrs.API).Port()
	for page, link := range map[string]string{"demo": m[1], "playground": m[2]} {
		require.Equal(t, port, mustURL(t, link).Port(), "the %s's link names the server's port: %s", page, link)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, link, nil)
		require.NoError(t, err)
		resp, err := httpClient.Do(req)
		require.NoError(t, err, "the %s at %s", page, link)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "the %s at %s:\n%s", page, link, body)
		require.Contains(t, resp.Header.Get("Content-Type"), "text/html", "the %s at %s", page, link)
	}
	require.FileExists(t, filepath.Join(pgDir, "postmaster.pid"), "the server runs on the PostgreSQL it started")

	require.NoError(t, p.Signal(syscall.SIGINT))
	state, err := p.Wait(time.Minute)
	require.NoError(t, err)
	require.True(t, state.Success(), "Ctrl-C is a clean stop, not %s", state)
	require.NoFileExists(t, filepath.Join(pgDir, "postmaster.pid"), "the PostgreSQL it started is stopped with it")
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}
