package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	goretry "github.com/sethvargo/go-retry"
)

// Part is one process of the cluster that is not PostgreSQL's: a NATS node,
// a chargeonce instance or the receipts consumer, each a run of the
// chargeonce binary with its own log file. It can be killed and started
// again.
type Part struct {
	// Name is how the cluster's summary and the chaos run call it.
	Name string
	// URL is where it answers: an instance's HTTP, a NATS node's clients.
	URL string
	// Log is its log file; a restart appends to it.
	Log string

	binary string
	args   []string
	env    []string
	// ready answers nil once the part serves.
	ready func(ctx context.Context) error

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts the part and waits until it is ready, for at most within.
// A part that exits before that is an error with its log's tail.
func (p *Part) Start(ctx context.Context, within time.Duration) error {
	log, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(p.binary, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a Ctrl-C to the terminal is the supervisor's to
	// pass on, in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	if p.ready == nil {
		return nil
	}
	err = goretry.Do(ctx, goretry.WithMaxDuration(within, goretry.NewConstant(100*time.Millisecond)), func(ctx context.Context) error {
		select {
		case <-done:
			return fmt.Errorf("%s exited: %s", p.Name, cmd.ProcessState)
		default:
		}
		return goretry.RetryableError(p.ready(ctx))
	})
	if err != nil {
		return fmt.Errorf("%s is not ready: %w\n%s", p.Name, err, p.LogTail(20))
	}
	return nil
}

// PID is the part's process id, 0 when it has not started.
func (p *Part) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill ends the part with SIGKILL, as a crash of its machine would, and
// waits until it is gone.
func (p *Part) Kill() error {
	return p.signal(syscall.SIGKILL, time.Minute)
}

// Stop asks the part to stop (SIGTERM), and kills it after grace.
func (p *Part) Stop(grace time.Duration) error {
	err := p.signal(syscall.SIGTERM, grace)
	if errors.Is(err, errStillRunning) {
		return errors.Join(err, p.Kill())
	}
	return err
}

var errStillRunning = errors.New("still running")

func (p *Part) signal(sig syscall.Signal, within time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
		return nil
	case <-time.After(within):
		return fmt.Errorf("%s: %w %s after %s", p.Name, errStillRunning, sig, within)
	}
}

// LogTail is the last n lines of the part's log.
func (p *Part) LogTail(n int) string { return Tail(p.Log, n) }

// Tail is the last n lines of the file at path, or "" when it cannot be read.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
