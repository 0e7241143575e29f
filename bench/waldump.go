package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// recordConc is the concurrency whose server runs -waldump and -statements
// record.
const recordConc = 8

// walRecords writes the WAL that a slice of the server run name wrote at
// concurrency c, from the WAL position from to to, by record type
// (pg_waldump --stats=record), into OUT/waldump/NAME-cC.txt, headed by the
// slice's requests: where a request's WAL goes, which the figures' WAL per
// request only totals. A slice whose WAL a checkpoint already recycled
// is logged and skipped.
func (b *bench) walRecords(name string, c int, from, to string, requests int) {
	bin, err := findPGProgram("pg_waldump")
	if err != nil {
		b.logf("waldump %s-c%d: %v", name, c, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--stats=record", "-p", filepath.Join(b.pgDir, "pg_wal"), "-s", from, "-e", to).CombinedOutput()
	if err != nil {
		b.logf("waldump %s-c%d: %v\n%s", name, c, err, out)
		return
	}
	dir := filepath.Join(b.opts.out, "waldump")
	path := filepath.Join(dir, fmt.Sprintf("%s-c%d.txt", name, c))
	header := fmt.Sprintf("# %s at concurrency %d: %d requests; WAL from %s to %s, by record type (pg_waldump --stats=record)\n",
		name, c, requests, from, to)
	err = os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(path, append([]byte(header), out...), 0o644)
	}
	if err != nil {
		b.logf("waldump %s-c%d: %v", name, c, err)
		return
	}
	b.logf("waldump %s", path)
}
