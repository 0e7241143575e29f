package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"chargeonce/internal/apiclient"
	"chargeonce/internal/proc"
)

// server is one chargeonce process under load.
type server struct {
	URL string
	// metricsURL is the listener with /metrics and the profiler.
	metricsURL string
	// api is the typed client of the demo merchant.
	api *apiclient.Client
	p   *proc.Process
}

// startServer starts the binary with env on top of the bench's own
// environment and waits until it answers /readyz.
func startServer(ctx context.Context, binary string, env map[string]string) (*server, error) {
	env["APP_ENV"] = "development"
	p, err := proc.Start(binary, proc.Options{Args: []string{"serve"}, Env: env})
	if err != nil {
		return nil, err
	}
	addrs, err := p.Listening(ctx, 60*time.Second)
	if err != nil {
		_ = p.Kill()
		return nil, err
	}
	s := &server{URL: addrs.Loopback(), metricsURL: strings.TrimSuffix(addrs.Metrics, "/metrics"), p: p}
	s.api = apiclient.New(s.URL, apiclient.DemoAPIKey, nil)
	if err := p.Ready(ctx, 30*time.Second, s.api.Ready); err != nil {
		_ = p.Kill()
		return nil, err
	}
	return s, nil
}

// stop ends the server with SIGTERM, then SIGKILL after 10s.
func (s *server) stop() { _ = s.p.Stop(10 * time.Second) }

// resetPeakRSS starts a new peak-RSS window for the process (writing 5 to
// clear_refs resets VmHWM); where the kernel refuses, the peak is the
// process's since it started.
func (s *server) resetPeakRSS() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.p.PID()), []byte("5"), 0)
}

// peakRSSMB reads VmHWM, the peak resident set, in MB.
func (s *server) peakRSSMB() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.p.PID()))
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
