package proc

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStart_ReadsTheAnnouncementAndStops(t *testing.T) {
	t.Parallel()
	p, err := Start("/bin/sh", Options{Args: []string{"-c",
		`echo 'level=INFO msg="starting"'; echo "level=INFO msg=\"chargeonce listening\" addr=http://127.0.0.1:4242 $GREETING"; exec sleep 60`},
		Env: map[string]string{"GREETING": "hello=world"}, Group: true})
	require.NoError(t, err)
	addrs, err := p.Listening(context.Background(), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:4242", addrs.API)
	require.Contains(t, p.Output(), "hello=world", "the environment reached the process")
	require.NoError(t, p.Stop(10*time.Second))
	require.True(t, KilledBy(p.State(), syscall.SIGTERM))
}

func TestListening_ProcessExitsFirst_FailsWithItsOutput(t *testing.T) {
	t.Parallel()
	p, err := Start("/bin/sh", Options{Args: []string{"-c", "echo the port is taken; exit 3"}})
	require.NoError(t, err)
	_, err = p.Listening(context.Background(), 10*time.Second)
	require.ErrorContains(t, err, "exited")
	require.ErrorContains(t, err, "the port is taken")
	require.Equal(t, 3, p.State().ExitCode())
}

func TestReady_ChecksUntilNil(t *testing.T) {
	t.Parallel()
	p, err := Start("/bin/sleep", Options{Args: []string{"60"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Kill() })
	calls := 0
	require.NoError(t, p.Ready(context.Background(), 10*time.Second, func(context.Context) error {
		if calls++; calls < 3 {
			return context.DeadlineExceeded
		}
		return nil
	}))
	require.Equal(t, 3, calls)
	require.NoError(t, p.Kill())
	require.True(t, KilledBy(p.State(), syscall.SIGKILL))
}

func TestStart_Stdout_KeepsTheAnswerApartFromTheLog(t *testing.T) {
	t.Parallel()
	var stdout strings.Builder
	p, err := Start("/bin/sh", Options{Args: []string{"-c", "echo the answer; echo a log line >&2; exit 2"}, Stdout: &stdout})
	require.NoError(t, err)
	state, err := p.Wait(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, 2, state.ExitCode())
	require.Equal(t, "the answer\n", stdout.String(), "all of it, once the process is done")
	require.Equal(t, "a log line\n", p.Output())
}

func TestCPUTicks_CountWhatTheProcessWorked(t *testing.T) {
	t.Parallel()
	// A shell that counts for a while (a busy loop of its own, some tens of
	// ticks), then says so and sleeps.
	p, err := Start("/bin/sh", Options{Args: []string{"-c",
		`i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo counted; exec sleep 60`}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Kill() })
	require.Eventually(t, func() bool { return strings.Contains(p.Output(), "counted") }, time.Minute, 10*time.Millisecond)
	busy, err := p.CPUTicks()
	require.NoError(t, err)
	require.Positive(t, busy, "the count took CPU")
	require.NoError(t, p.Kill())
	_, err = p.CPUTicks()
	require.Error(t, err, "a process gone has no CPU time to read")
}
