package systest

import (
	"context"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/events/eventstest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/cli"
	"chargeonce/internal/listening"
	"chargeonce/internal/proc"
	"chargeonce/internal/testlog"
)

func TestMain(m *testing.M) {
	code := m.Run()
	eventstest.StopShared()
	if binaryDir != "" {
		_ = os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// needsProcesses skips t under go test -short; every test here calls it
// first.
func needsProcesses(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts chargeonce (and PostgreSQL) as processes; skipped with -short")
	}
}

// The chargeonce binary, built once per test run.
var (
	binaryOnce sync.Once
	binaryDir  string
	binaryPath string
	binaryErr  error
)

func binary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		if binaryDir, binaryErr = os.MkdirTemp("", "chargeonce-systest-"); binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "chargeonce")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		binaryErr = proc.Build(ctx, ".", binaryPath)
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

// start starts chargeonce with args, with env on top of APP_ENV=development
// and of this process's environment; with stdout, its standard output goes
// there alone (proc.Options.Stdout). It is killed when the test ends, and
// its output logged if the test failed.
func start(t *testing.T, env map[string]string, stdout *testlog.Buffer, args ...string) *proc.Process {
	t.Helper()
	vars := map[string]string{"APP_ENV": "development"}
	maps.Copy(vars, env)
	opts := proc.Options{Args: args, Env: vars}
	if stdout != nil {
		opts.Stdout = stdout
	}
	p, err := proc.Start(binary(t), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Errorf("kill chargeonce %v: %v", args, err)
		}
		if t.Failed() {
			t.Logf("output of chargeonce %v (pid %d, %s):\n%s", args, p.PID(), p.State(), p.Output())
		}
	})
	return p
}

// requireKilled waits for p to die of SIGKILL, as a fault makes it.
func requireKilled(t *testing.T, p *proc.Process, within time.Duration, msgAndArgs ...any) {
	t.Helper()
	state, err := p.Wait(within)
	require.NoError(t, err)
	require.True(t, proc.KilledBy(state, syscall.SIGKILL), msgAndArgs...)
}

// requireStopsCleanly sends p SIGTERM and requires a clean exit within
// the time given.
func requireStopsCleanly(t *testing.T, p *proc.Process, within time.Duration, msg string) {
	t.Helper()
	require.NoError(t, p.Signal(syscall.SIGTERM))
	state, err := p.Wait(within)
	require.NoError(t, err, msg)
	require.True(t, state.Success(), "%s: a clean exit, not %s", msg, state)
}

// waitLogged waits until p's output holds a line that re matches; it
// fails if p exits first or nothing matches within the time given.
func waitLogged(t *testing.T, p *proc.Process, re *regexp.Regexp, within time.Duration) {
	t.Helper()
	logged := func() bool { return re.MatchString(p.Output()) }
	require.Eventually(t, func() bool { return logged() || p.Exited() }, within, 10*time.Millisecond,
		"nothing logged matches %s after %s", re, within)
	require.True(t, logged(), "%s exited (%s) before logging %s", p.Name, p.State(), re)
}

// server is `chargeonce serve` running as a process.
type server struct {
	*proc.Process
	Addrs listening.Addrs
	URL   string // the API on loopback
	HTTP  *http.Client
}

// startServer starts `chargeonce serve` on a port of its own choosing,
// with env on top of short test intervals and the shared broker (unless
// env names a broker of the test's own), and
// waits until it has said where it listens and answers /readyz.
func startServer(t *testing.T, env map[string]string) *server {
	t.Helper()
	vars := map[string]string{
		"PORT":               "0",
		"SIM_SLOW_DELAY":     "300ms",
		"PROCESSING_LEASE":   "2s",
		"RECONCILE_INTERVAL": "200ms",
		// Every line a server can write, for the tests that scan for secrets.
		"LOG_LEVEL": "debug",
	}
	if _, own := env["NATS_URL"]; !own {
		vars["NATS_URL"] = eventstest.Shared(t).URL()
	}
	maps.Copy(vars, env)
	s := &server{Process: start(t, vars, nil, "serve"),
		HTTP: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	t.Cleanup(s.HTTP.CloseIdleConnections)
	var err error
	s.Addrs, err = s.Listening(t.Context(), time.Minute)
	require.NoError(t, err)
	s.URL = s.Addrs.Loopback()
	require.NoError(t, s.Ready(t.Context(), 30*time.Second, s.client("").Ready))
	return s
}

// client is an API client of s for the merchant of apiKey.
func (s *server) client(apiKey string) *apiclient.Client { return apiclient.New(s.URL, apiKey, s.HTTP) }

// demo is s's client for the demo merchant.
func (s *server) demo() *apiclient.Client { return s.client(apiclient.DemoAPIKey) }

// commandResult is how a command ended: what it printed, apart from what
// it logged, and its exit status.
type commandResult struct {
	stdout, stderr string
	code           int
}

// runCommand runs chargeonce with args (an operator's command) and env as
// start does, and waits for it to end.
func runCommand(t *testing.T, env map[string]string, args ...string) commandResult {
	t.Helper()
	var stdout testlog.Buffer
	p := start(t, env, &stdout, args...)
	state, err := p.Wait(2 * time.Minute)
	require.NoError(t, err)
	return commandResult{stdout: stdout.String(), stderr: p.Output(), code: state.ExitCode()}
}

// requireOK requires that the command succeeded.
func (r commandResult) requireOK(t *testing.T) {
	t.Helper()
	require.Zero(t, r.code, "the command failed:\n%s%s", r.stdout, r.stderr)
}

// requireFailed requires that the command failed (exit status 1) with an
// error that says each of wants.
func (r commandResult) requireFailed(t *testing.T, wants ...string) {
	t.Helper()
	require.Equal(t, 1, r.code, "the command did not fail as it should:\n%s%s", r.stdout, r.stderr)
	for _, want := range wants {
		require.Contains(t, r.stderr, want)
	}
}

// requireUsage requires that the command was refused as one chargeonce
// does not have: exit status 2, with the usage.
func (r commandResult) requireUsage(t *testing.T) {
	t.Helper()
	require.Equal(t, 2, r.code, "not refused with the usage:\n%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, cli.ErrUsage.Error())
}
