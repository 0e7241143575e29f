package localpg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func writePIDFile(t *testing.T, dataDir string, pid, port int) {
	t.Helper()
	// The layout postgres writes: pid, data dir, start time, port, socket
	// dir, listen address, shared memory key, status.
	content := fmt.Sprintf("%d\n%s\n%d\n%d\n\n127.0.0.1\n  5432001     32768\nready   \n",
		pid, dataDir, time.Now().Unix(), port)
	if err := os.WriteFile(filepath.Join(dataDir, "postmaster.pid"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStalePIDFileDoesNotBlockStart(t *testing.T) {
	dir := filepath.Join(reachableDir(t), "pg")
	s := start(t, dir, true)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	for name, pid := range map[string]int{
		"dead process": deadPID(t),
		// A pid reused by a live process that is no postgres, as after a reboot.
		"reused pid": os.Getpid(),
	} {
		writePIDFile(t, dir, pid, s.port)
		// Must be a no-op: in particular it must not signal the process
		// that now has the pid (this test, in the second case).
		if err := Stop(context.Background(), dir); err != nil {
			t.Errorf("%s: Stop: %v", name, err)
		}
		s2, err := Start(context.Background(), Options{Dir: dir, Fast: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !s2.Started {
			t.Errorf("%s: want Started", name)
		}
		if query[int](t, s2.URL, "SELECT 1") != 1 {
			t.Errorf("%s: server does not answer", name)
		}
		if err := s2.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStartAfterServerKilled(t *testing.T) {
	dir := filepath.Join(reachableDir(t), "pg")
	s := start(t, dir, true)
	pf, err := s.inst.readPIDFile()
	if err != nil {
		t.Fatal(err)
	}
	children := childPIDs(pf.pid)
	if err := syscall.Kill(pf.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The backends exit once they notice; until then they hold the shared
	// memory and postgres rightly refuses to start.
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range append(children, pf.pid) {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}

	s2 := start(t, dir, true)
	if !s2.Started {
		t.Error("want Started after the server was killed")
	}
	if query[int](t, s2.URL, "SELECT 1") != 1 {
		t.Error("server does not answer")
	}
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			pids = append(pids, p)
		}
	}
	return pids
}
