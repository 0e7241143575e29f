package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/events/eventstest"
)

// The server binary, built once per test run for the tests that kill or
// signal a real process.
var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

func serverBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "chargeonce-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "chargeonce")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

// serverProcess is chargeonce running as a real process.
type serverProcess struct {
	*testServer
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
	state  *os.ProcessState
}

// startProcess starts the server binary with env (on top of short test
// intervals), on a port of its own choosing, and waits until it is ready.
func startProcess(t *testing.T, env map[string]string) *serverProcess {
	t.Helper()
	vars := map[string]string{
		"PORT":               "0",
		"SIM_SLOW_DELAY":     "300ms",
		"PROCESSING_LEASE":   "2s",
		"RECONCILE_INTERVAL": "200ms",
		"NATS_URL":           eventstest.Shared(t).URL(),
	}
	for k, v := range env {
		vars[k] = v
	}
	p := spawn(t, vars, "serve")
	p.URL = listeningURL(t, p.exited, p.logs)
	p.waitReady(t, p.exited, p.logs)
	return p
}

// spawn starts the chargeonce binary with args (none: the server) and
// exactly vars on top of the test process's environment, and kills it when
// the test ends if it is still running.
func spawn(t *testing.T, vars map[string]string, args ...string) *serverProcess {
	t.Helper()
	cmd := exec.Command(serverBinary(t), args...)
	cmd.Env = append(os.Environ(), "APP_ENV=development")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logs := &syncBuffer{}
	p := &serverProcess{
		testServer: &testServer{
			client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
			log:    logs,
		},
		cmd:    cmd,
		logs:   logs,
		exited: make(chan struct{}),
	}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("log of chargeonce %v %s:\n%s", args, p.URL, p.logs.String())
		}
	})
	return p
}

// wait waits for the process to exit and returns how it ended.
func (p *serverProcess) wait(t *testing.T, timeout time.Duration) *os.ProcessState {
	t.Helper()
	select {
	case <-p.exited:
		return p.state
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %s", timeout)
		return nil
	}
}

// killedBySIGKILL reports whether the process died of SIGKILL.
func killedBySIGKILL(state *os.ProcessState) bool {
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
