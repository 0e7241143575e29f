package localpg

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

func (in *instance) server(port int, started bool, settings []string) *Server {
	base := "postgres://" + localUser + "@127.0.0.1:" + strconv.Itoa(port) + "/"
	return &Server{
		URL:      base + Database + "?sslmode=disable",
		AdminURL: base + "postgres?sslmode=disable",
		Started:  started,
		port:     port,
		settings: settings,
		inst:     in,
	}
}

// running reports the port of a server that is up in this data directory: its
// postmaster.pid names a port on which a server answers, and that server's
// data directory is this one (and not, say, an unrelated server that took
// the port of a stale pid file).
func (in *instance) running(ctx context.Context) (int, bool) {
	pf, err := in.readPIDFile()
	if err != nil || pf.port == 0 || !alive(pf.pid) {
		return 0, false
	}
	cfg, err := pgx.ParseConfig(in.server(pf.port, false, nil).AdminURL)
	if err != nil {
		return 0, false
	}
	cfg.ConnectTimeout = 5 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, false
	}
	defer conn.Close(context.Background())
	var dataDir string
	if err := conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dataDir); err != nil {
		return 0, false
	}
	a, errA := os.Stat(dataDir)
	b, errB := os.Stat(in.dir)
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		return 0, false
	}
	return pf.port, true
}

// start starts the server on a loopback port, with the extra settings
// beyond its own, and waits until it accepts connections. With port 0 the
// port is chosen anew at each start so the server never collides with a
// system PostgreSQL on 5432 or with another checkout's; the rare loss of the
// port to another program between choosing and binding it is retried. A
// given port (Restart's) is tried once.
func (in *instance) start(ctx context.Context, extra []string, port int) (int, error) {
	fixed := port != 0
	var lastErr error
	for range 3 {
		if !fixed {
			var err error
			if port, err = FreePort(); err != nil {
				return 0, fmt.Errorf("local PostgreSQL: pick a port: %w", err)
			}
		}
		settings := []string{
			"listen_addresses=127.0.0.1",
			"port=" + strconv.Itoa(port),
			// No Unix socket: nothing to clash with, and no limit of ~107
			// bytes on the socket path.
			"unix_socket_directories=''",
			// Tests open many pools at once.
			"max_connections=300",
		}
		settings = append(settings, extra...)
		// pg_ctl passes -o through /bin/sh, so the values must be shell words.
		opts := "-c " + strings.Join(settings, " -c ")
		out, err := in.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", in.dir, "-l", in.logPath(), "-o", opts)
		if err == nil {
			return port, nil
		}
		lastErr = fmt.Errorf("local PostgreSQL: pg_ctl start: %w\n%s%s", err, Tail(out, 20), in.logTail())
		if fixed || !strings.Contains(in.logTail(), "could not bind") {
			break
		}
	}
	return 0, lastErr
}

// FreePort is a loopback TCP port that was free a moment ago, picked as
// ListenFree picks it.
func FreePort() (int, error) {
	l, err := ListenFree()
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// The range that ListenFree picks ports from: below the kernel's range of
// ephemeral ports (Linux: 32768 and up), which every "listen on port 0" of
// another program or test draws from, so that between the pick and the
// server's own listen none of them can take the port.
const (
	freePortsFrom = 20000
	freePortsTo   = 32000
)

// ListenFree listens on a free loopback port picked at random from
// [20000, 32000). Close it just before the server that is to have the port
// listens on it.
func ListenFree() (net.Listener, error) {
	var err error
	for range 100 {
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(freePortsFrom+rand.IntN(freePortsTo-freePortsFrom))); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("local PostgreSQL: no free port between %d and %d: %w", freePortsFrom, freePortsTo, err)
}

// stop stops the server in the data directory, if one runs (pg_ctl stop
// in mode: "fast", or "immediate", as a crash would).
func (in *instance) stop(ctx context.Context, mode string) error {
	// Checked before locking too, so stopping nothing creates no lock file.
	if _, err := os.Stat(filepath.Join(in.dir, "postmaster.pid")); os.IsNotExist(err) {
		return nil
	}
	unlock, err := in.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return in.stopLocked(ctx, mode)
}

// stopLocked is stop for a caller that holds the lock.
func (in *instance) stopLocked(ctx context.Context, mode string) error {
	pf, err := in.readPIDFile()
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("local PostgreSQL: %w", err)
	}
	if !alive(pf.pid) || !isPostgres(pf.pid, in.dir) {
		// A stale pid file (Start clears it): pg_ctl would signal
		// whatever process now has that pid.
		return nil
	}
	out, err := in.run(ctx, "pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", in.dir)
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(in.dir, "postmaster.pid")); os.IsNotExist(statErr) {
			return nil // it stopped on its own meanwhile
		}
		return fmt.Errorf("local PostgreSQL: pg_ctl stop: %w\n%s%s", err, Tail(out, 20), in.logTail())
	}
	return nil
}

func (in *instance) logPath() string { return filepath.Join(in.dir, logName) }

// logTail returns the end of the server log, prefixed for appending to an
// error, or "" if there is none.
func (in *instance) logTail() string {
	f, err := os.Open(in.logPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 8 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	t := Tail(b, 20)
	if t == "" {
		return ""
	}
	return "\n" + in.logPath() + " ends with:\n" + t
}

// Tail is the last n lines of b.
func Tail(b []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
