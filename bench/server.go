package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"chargeonce/cluster"
)

// listenLine finds the port in the server's "chargeonce listening" log line.
var listenLine = regexp.MustCompile(`chargeonce listening"?,?\s*"?addr"?[=:]"?http://[^ "]*:(\d+)`)

// metricsLine finds the address in the server's "metrics listening" line.
var metricsLine = regexp.MustCompile(`metrics listening"?,?\s*"?addr"?[=:]"?(http://[^ "/]*)`)

// server is one chargeonce process under load.
type server struct {
	URL string
	// metricsURL is the listener with /metrics and the profiler.
	metricsURL string
	cmd        *exec.Cmd
	mu         sync.Mutex
	logs       strings.Builder
	exited     chan struct{}
}

// startServer starts the binary with env on top of the bench's own
// environment and waits until it answers /readyz.
func startServer(ctx context.Context, binary string, env map[string]string) (*server, error) {
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), "APP_ENV=development")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	s := &server{cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			if s.logs.Len() < 1<<20 {
				s.logs.WriteString(line + "\n")
			}
			if m := metricsLine.FindStringSubmatch(line); m != nil {
				s.metricsURL = m[1]
			}
			s.mu.Unlock()
			if m := listenLine.FindStringSubmatch(line); m != nil {
				select {
				case port <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(s.exited)
	}()
	select {
	case p := <-port:
		s.URL = "http://127.0.0.1:" + p
	case <-s.exited:
		return nil, fmt.Errorf("server exited before listening:\n%s", s.log())
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, fmt.Errorf("server did not listen within 60s:\n%s", s.log())
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if cluster.Ready(ctx, s.URL) == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("server not ready within 30s:\n%s", s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// stop ends the server with SIGTERM, then SIGKILL after 10s.
func (s *server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// resetPeakRSS starts a new peak-RSS window for the process (writing 5 to
// clear_refs resets VmHWM); where the kernel refuses, the peak is the
// process's since it started.
func (s *server) resetPeakRSS() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.cmd.Process.Pid), []byte("5"), 0)
}

// peakRSSMB reads VmHWM, the peak resident set, in MB.
func (s *server) peakRSSMB() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
