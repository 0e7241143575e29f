// Package proc runs chargeonce's programs as processes, for the tools and
// the tests that need a real one (to kill it, to signal it, to run its
// command line, to load it from outside): Build builds a program of the
// module, Start runs it with its output kept, and a Process waits for the
// line in which a server says where it listens, for readiness, and for its
// end. The benchmark, the lab and the process tests all start processes
// through it.
package proc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	goretry "github.com/sethvargo/go-retry"

	"chargeonce/internal/listening"
)

// Build builds the main package pkg (a path from the module's root, such as
// "." or "./lab") into the file out, from the root of the module that holds
// the working directory.
func Build(ctx context.Context, pkg, out string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// ModuleRoot is the directory that holds go.mod, from the working
// directory (a package's, under go test) up.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Options configures Start.
type Options struct {
	Args []string
	// Env is set on top of this process's environment.
	Env map[string]string
	// Dir is the working directory; "" is this process's.
	Dir string
	// Output also gets everything the process writes (a log file, say);
	// nil: it is only kept.
	Output io.Writer
	// Stdout, when set, gets the standard output alone, and the kept
	// output is the standard error: for a command whose answer is what it
	// prints, apart from what it logs.
	Stdout io.Writer
	// Group runs it in a process group of its own, which every signal then
	// reaches whole (its children too), and which a terminal's Ctrl-C does
	// not.
	Group bool
}

// keptOutput bounds what a Process keeps of its output.
const keptOutput = 4 << 20

// Process is a running program.
type Process struct {
	Name string // the binary's base name, for errors
	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	output  strings.Builder
	addrs   listening.Addrs
	listens chan struct{} // closed once the announcement is read
}

// Start starts binary as opts say.
func Start(binary string, opts Options) (*Process, error) {
	cmd := exec.Command(binary, opts.Args...)
	cmd.Dir = opts.Dir
	cmd.Env = os.Environ()
	for k, v := range opts.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if opts.Group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if opts.Stdout != nil {
		cmd.Stdout = opts.Stdout
	}
	p := &Process{Name: filepath.Base(binary), cmd: cmd, done: make(chan struct{}), listens: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.Name, err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		p.read(pr, opts.Output)
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
		<-read
		close(p.done)
	}()
	return p, nil
}

// read keeps the output, copies it to also, and watches for the
// announcement of a server's addresses.
func (p *Process) read(r io.Reader, also io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if also != nil {
			_, _ = io.WriteString(also, line+"\n")
		}
		p.mu.Lock()
		if p.output.Len() < keptOutput {
			p.output.WriteString(line + "\n")
		}
		if a, ok := listening.Parse(line); ok && p.addrs.API == "" {
			p.addrs = a
			close(p.listens)
		}
		p.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r) // a line too long to scan: keep the process writing
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// CPUTicks is the CPU time the process has used so far, user and system,
// in clock ticks of the kernel's (USER_HZ: 100 a second here), from utime
// and stime of /proc/PID/stat.
func (p *Process) CPUTicks() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID()))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which may hold spaces, in
	// parentheses: state is the third field, utime the 14th, stime the 15th.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", p.PID(), len(fields))
	}
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	if err != nil {
		return 0, err
	}
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime, err
}

// Output is what the process has written so far (its first 4 MB).
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// Tail is the last n lines of Output.
func (p *Process) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Output(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Done is closed once the process has exited and its output is read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// State is how the process ended; nil while it runs.
func (p *Process) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// Listening waits until the process, a chargeonce server, has announced
// where it listens, for at most within; it fails when the process exits
// first.
func (p *Process) Listening(ctx context.Context, within time.Duration) (listening.Addrs, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.listens:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.addrs, nil
	case <-p.done:
		return listening.Addrs{}, fmt.Errorf("%s exited (%s) before it listened:\n%s", p.Name, p.cmd.ProcessState, p.Tail(40))
	case <-t.C:
		return listening.Addrs{}, fmt.Errorf("%s did not listen within %s:\n%s", p.Name, within, p.Tail(40))
	case <-ctx.Done():
		return listening.Addrs{}, ctx.Err()
	}
}

// Ready calls check until it answers nil, for at most within; it fails
// with check's last error, or when the process exits first.
func (p *Process) Ready(ctx context.Context, within time.Duration, check func(context.Context) error) error {
	err := goretry.Do(ctx, goretry.WithMaxDuration(within, goretry.NewConstant(50*time.Millisecond)), func(ctx context.Context) error {
		if p.Exited() {
			return fmt.Errorf("%s exited: %s", p.Name, p.cmd.ProcessState)
		}
		return goretry.RetryableError(check(ctx))
	})
	if err != nil {
		return fmt.Errorf("%s is not ready: %w\n%s", p.Name, err, p.Tail(40))
	}
	return nil
}

// Wait waits for the process to exit, for at most within, and says how it
// ended.
func (p *Process) Wait(within time.Duration) (*os.ProcessState, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.done:
		return p.cmd.ProcessState, nil
	case <-t.C:
		return nil, fmt.Errorf("%s still runs after %s", p.Name, within)
	}
}

// Signal sends sig to the process, or to its group when it has one.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	pid := p.cmd.Process.Pid
	if p.cmd.SysProcAttr != nil && p.cmd.SysProcAttr.Setpgid {
		pid = -pid
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Kill ends the process with SIGKILL, as the loss of its machine would, and
// waits until it is gone.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	_, err := p.Wait(time.Minute)
	return err
}

// Stop asks the process to stop (SIGTERM) and kills it after grace; it
// fails when the process had to be killed.
func (p *Process) Stop(grace time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if _, err := p.Wait(grace); err != nil {
		return errors.Join(fmt.Errorf("%s: SIGTERM: %w", p.Name, err), p.Kill())
	}
	return nil
}

// KilledBy reports whether a process that ended as state died of sig.
func KilledBy(state *os.ProcessState, sig syscall.Signal) bool {
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
