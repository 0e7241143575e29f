package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"chargeonce/internal/proc"
)

// Part is one process of the cluster that is not PostgreSQL's: a NATS node,
// a chargeonce instance or the receipts consumer, each with its own log
// file. It can be killed and started again.
type Part struct {
	// Name is how the cluster's summary and the chaos run call it.
	Name string
	// URL is where it answers: an instance's HTTP, a NATS node's clients.
	URL string
	// Log is its log file; a restart appends to it.
	Log string

	binary string
	args   []string
	env    map[string]string
	// ready answers nil once the part serves.
	ready func(ctx context.Context) error

	mu sync.Mutex
	p  *proc.Process
	// logFrom is the log's size when the part last started.
	logFrom int64
}

// Start starts the part and waits until it is ready, for at most within.
// A part that exits before that is an error with its log's tail.
func (p *Part) Start(ctx context.Context, within time.Duration) error {
	log, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if st, err := log.Stat(); err == nil {
		p.logFrom = st.Size()
	}
	// Its own process group: a Ctrl-C to the terminal is the supervisor's to
	// pass on, in order.
	started, err := proc.Start(p.binary, proc.Options{Args: p.args, Env: p.env, Output: log, Group: true})
	if err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	go func() { <-started.Done(); log.Close() }()
	p.mu.Lock()
	p.p = started
	p.mu.Unlock()
	if p.ready == nil {
		return nil
	}
	if err := started.Ready(ctx, within, p.ready); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	return nil
}

func (p *Part) process() *proc.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p
}

// PID is the part's process id, 0 when it has not started.
func (p *Part) PID() int {
	if pr := p.process(); pr != nil {
		return pr.PID()
	}
	return 0
}

// Kill ends the part with SIGKILL, as a crash of its machine would, and
// waits until it is gone.
func (p *Part) Kill() error {
	if pr := p.process(); pr != nil {
		return pr.Kill()
	}
	return nil
}

// Stop asks the part to stop (SIGTERM), and kills it after grace.
func (p *Part) Stop(grace time.Duration) error {
	if pr := p.process(); pr != nil {
		return pr.Stop(grace)
	}
	return nil
}

// logSinceStart is what the part wrote to its log since it last started.
func (p *Part) logSinceStart() string {
	b, err := os.ReadFile(p.Log)
	if err != nil || int64(len(b)) < p.logFrom {
		return ""
	}
	return string(b[p.logFrom:])
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
