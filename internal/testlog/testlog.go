// Package testlog is a log sink for tests: a buffer that a server or a
// consumer writes from its goroutines while the test reads it, and the
// reader of a JSON log's lines.
package testlog

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer safe for concurrent writes and reads.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// JSONLines parses a JSON log and returns the lines keep selects; a line
// that is not a JSON object fails t.
func JSONLines(t testing.TB, log string, keep func(line map[string]any) bool) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(log) {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON log line: %q: %v", line, err)
		}
		if keep(l) {
			out = append(out, l)
		}
	}
	return out
}
