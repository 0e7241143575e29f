package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lock takes an exclusive flock on a file beside the data directory, so that
// processes starting or stopping the same server do it one at a time. The
// kernel drops it if the process dies.
func (in *instance) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(in.dir), 0o755); err != nil {
		return nil, fmt.Errorf("local PostgreSQL: %w", err)
	}
	path := in.dir + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local PostgreSQL: open lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("local PostgreSQL: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("local PostgreSQL: waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// pidFile holds the fields of postmaster.pid that matter here.
type pidFile struct {
	pid  int
	port int
}

func (in *instance) readPIDFile() (pidFile, error) {
	b, err := os.ReadFile(filepath.Join(in.dir, "postmaster.pid"))
	if err != nil {
		return pidFile{}, err
	}
	lines := strings.Split(string(b), "\n")
	var pf pidFile
	if len(lines) > 0 {
		pf.pid, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	}
	if len(lines) > 3 {
		pf.port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	return pf, nil
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// removeStalePID removes a postmaster.pid whose process is gone (a crash, a
// killed container). postgres would cope with most of these itself, but not
// when the pid has since been reused by another process of the same user.
// Called with the lock held and no server answering.
func (in *instance) removeStalePID() error {
	path := filepath.Join(in.dir, "postmaster.pid")
	pf, err := in.readPIDFile()
	if os.IsNotExist(err) {
		return nil
	}
	if err == nil && alive(pf.pid) && isPostgres(pf.pid, in.dir) {
		return fmt.Errorf("local PostgreSQL: a server (pid %d) seems to run in %s but does not answer on port %d "+
			"(if no server runs there, remove postmaster.pid)%s", pf.pid, in.dir, pf.port, in.logTail())
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("local PostgreSQL: remove stale %s: %w", path, err)
	}
	return nil
}

// isPostgres reports whether pid may be a server for data directory dir:
// false only when it is no postgres process at all, or one whose -D names
// another directory (such as the system cluster's, which runs as the same
// user and so may have inherited the pid after a reboot).
func isPostgres(pid int, dir string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return !os.IsNotExist(err) // no /proc: cannot tell, so assume it is
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if base := filepath.Base(args[0]); base != "postgres" && base != "postmaster" {
		// Backends rewrite their title to "postgres: ...".
		return strings.HasPrefix(args[0], "postgres:")
	}
	i := slices.Index(args, "-D")
	if i < 0 || i+1 >= len(args) {
		return true
	}
	d := args[i+1]
	if !filepath.IsAbs(d) {
		cwd, err := os.Readlink(proc + "/cwd")
		if err != nil {
			return true
		}
		d = filepath.Join(cwd, d)
	}
	a, errA := os.Stat(d)
	b2, errB := os.Stat(dir)
	return errA != nil || errB != nil || os.SameFile(a, b2)
}
