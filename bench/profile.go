package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profileConc is the concurrency whose runs -profile records: 32, or the
// highest below it.
func profileConc(concs []int) int {
	best := concs[0]
	for _, c := range concs {
		if c <= 32 {
			best = max(best, c)
		}
	}
	return best
}

// profileDuring starts a CPU profile of srv for most of a run of d and returns
// a function that waits for it and writes OUT/profiles/NAME.pprof, with
// the top functions beside it in NAME.txt (go tool pprof -top).
func (b *bench) profileDuring(srv *server, name string, d time.Duration) (wait func()) {
	metricsURL := srv.metricsURL
	if metricsURL == "" {
		b.logf("profile %s: the server gave no metrics address", name)
		return func() {}
	}
	seconds := max(1, int((d - time.Second).Seconds()))
	done := make(chan error, 1)
	dir := filepath.Join(b.opts.out, "profiles")
	path := filepath.Join(dir, name+".pprof")
	go func() {
		done <- func() error {
			resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", metricsURL, seconds))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("profile: HTTP %d", resp.StatusCode)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, resp.Body); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}()
	}()
	return func() {
		if err := <-done; err != nil {
			b.logf("profile %s: %v", name, err)
			return
		}
		top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=30", b.binary, path).CombinedOutput()
		if err != nil {
			b.logf("profile %s: go tool pprof: %v\n%s", name, err, top)
			return
		}
		_ = os.WriteFile(strings.TrimSuffix(path, ".pprof")+".txt", top, 0o644)
		b.logf("profile %s: %s", name, path)
	}
}
