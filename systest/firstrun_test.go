package systest

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"chargeonce/db/dbtest"
	"chargeonce/db/localpg"
	"chargeonce/internal/proc"
	"chargeonce/internal/testlog"
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

// TestServe_UnderMakeInATerminal_CtrlC_MakeExitsZero is make run in a real
// terminal: make starts the server, and a Ctrl-C typed in the terminal
// (^C on a pseudo-terminal, whose line discipline sends SIGINT to the
// foreground process group) stops the server cleanly, and make exits 0.
// Without the server taking the foreground for itself, make receives the
// same SIGINT and dies of it (GNU make re-raises it), whatever the server
// returns.
func TestServe_UnderMakeInATerminal_CtrlC_MakeExitsZero(t *testing.T) {
	needsProcesses(t)
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on this machine")
	}
	t.Parallel()
	terminal, shell := openPTY(t)
	makefile := filepath.Join(t.TempDir(), "Makefile")
	require.NoError(t, os.WriteFile(makefile, []byte("run:\n\t"+binary(t)+" serve\n"), 0o644))
	cmd := exec.Command(makePath, "-f", makefile, "run")
	cmd.Env = append(os.Environ(), "APP_ENV=development", "PORT=0", "DATA_DIR="+t.TempDir(),
		"DATABASE_URL="+dbtest.NewDatabase(t), "NATS_URL=", "EMBEDDED_NATS_PORT=0")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = shell, shell, shell
	// make leads a session of its own on the terminal, as in a shell's
	// window; make is not a shell, and starts the server in its own group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	shell.Close() // the children hold it
	var out testlog.Buffer
	go func() { _, _ = io.Copy(&out, terminal) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the whole session, if the test failed midway
		if t.Failed() {
			t.Logf("the terminal:\n%s", out.String())
		}
	})

	require.Eventually(t, func() bool { return strings.Contains(out.String(), `msg="try it"`) }, 2*time.Minute, 50*time.Millisecond,
		"the server starts under make")
	_, err = terminal.Write([]byte{0x03}) // Ctrl-C
	require.NoError(t, err)
	select {
	case err := <-exited:
		require.NoError(t, err, "make exits 0 after a Ctrl-C")
	case <-time.After(time.Minute):
		t.Fatal("make did not exit within a minute of the Ctrl-C")
	}
	require.Contains(t, out.String(), "msg=stopped", "the server shut down cleanly")
}

// openPTY opens a pseudo-terminal: its controlling side, and the terminal
// side a program is given as its stdin, stdout and stderr.
func openPTY(t *testing.T) (terminal, shell *os.File) {
	t.Helper()
	terminal, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { terminal.Close() })
	fd := int(terminal.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	require.NoError(t, err)
	shell, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	return terminal, shell
}
