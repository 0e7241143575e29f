// Package jaeger runs the tracing backend that `make trace` and the
// tracing system test export to: Jaeger's all-in-one, built from the tools
// module tools/jaeger (its dependencies stay out of chargeonce's) into
// bin/jaeger, started on loopback ports of its own with
// tools/jaeger/all-in-one.yaml, and read through its HTTP query API.
package jaeger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"chargeonce/db/localpg"
	"chargeonce/internal/proc"
)

// Binary is bin/jaeger under the module's root, built from tools/jaeger
// when it is missing or older than the tools module's go.sum. The first
// build takes minutes: Jaeger is a large program.
func Binary(ctx context.Context) (string, error) {
	root, err := proc.ModuleRoot()
	if err != nil {
		return "", err
	}
	bin, tools := filepath.Join(root, "bin", "jaeger"), filepath.Join(root, "tools", "jaeger")
	built, errBin := os.Stat(bin)
	sum, errSum := os.Stat(filepath.Join(tools, "go.sum"))
	if errBin == nil && errSum == nil && built.ModTime().After(sum.ModTime()) {
		return bin, nil
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/jaegertracing/jaeger/cmd/jaeger")
	cmd.Dir = tools
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build Jaeger from tools/jaeger: %w\n%s", err, out)
	}
	return bin, nil
}

// Jaeger is a running all-in-one.
type Jaeger struct {
	*proc.Process
	// OTLP is where spans go (OTEL_EXPORTER_OTLP_ENDPOINT), Query the
	// query API's and the UI's base URL.
	OTLP, Query string
}

// Start starts binary on free loopback ports (below the ephemeral ones,
// which any connection's own end may take) and waits until its query
// API answers.
func Start(ctx context.Context, binary string) (*Jaeger, error) {
	root, err := proc.ModuleRoot()
	if err != nil {
		return nil, err
	}
	// Each held until all are picked, so that no two are the same, and let
	// go just before Jaeger listens.
	ports, held := make([]int, 3), make([]net.Listener, 0, 3)
	for i := range ports {
		l, err := localpg.ListenFree()
		if err != nil {
			closeAll(held)
			return nil, err
		}
		held = append(held, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	closeAll(held)
	p, err := proc.Start(binary, proc.Options{
		Args: []string{"--config", filepath.Join(root, "tools", "jaeger", "all-in-one.yaml")},
		Env: map[string]string{"JAEGER_OTLP_PORT": strconv.Itoa(ports[0]), "JAEGER_QUERY_PORT": strconv.Itoa(ports[1]),
			"JAEGER_QUERY_GRPC_PORT": strconv.Itoa(ports[2])},
	})
	if err != nil {
		return nil, err
	}
	j := &Jaeger{Process: p, OTLP: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), Query: fmt.Sprintf("http://127.0.0.1:%d", ports[1])}
	if err := p.Ready(ctx, time.Minute, func(ctx context.Context) error {
		_, err := j.get(ctx, "/api/services")
		return err
	}); err != nil {
		_ = p.Kill()
		return nil, fmt.Errorf("jaeger did not answer: %w\n%s", err, p.Tail(20))
	}
	return j, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

// Span is a span as the query API answers it.
type Span struct {
	TraceID    string `json:"traceID"`
	SpanID     string `json:"spanID"`
	Operation  string `json:"operationName"`
	References []struct {
		RefType string `json:"refType"` // CHILD_OF: the parent; FOLLOWS_FROM: a link
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// Parent is s's parent span in its trace, "" for a root.
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

// Tag is s's tag key, nil when it has none.
func (s Span) Tag(key string) any {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value
		}
	}
	return nil
}

// Trace is a trace's spans.
type Trace struct{ Spans []Span }

// Named are t's spans named op.
func (t Trace) Named(op string) []Span {
	var out []Span
	for _, s := range t.Spans {
		if s.Operation == op {
			out = append(out, s)
		}
	}
	return out
}

// ErrNotFound: the query API does not have the trace (yet).
var ErrNotFound = errors.New("jaeger: no such trace")

// Trace reads the trace id.
func (j *Jaeger) Trace(ctx context.Context, id string) (Trace, error) {
	ts, err := j.traces(ctx, "/api/traces/"+id)
	if err != nil || len(ts) == 0 {
		return Trace{}, errors.Join(err, ErrNotFound)
	}
	return ts[0], nil
}

// Find reads the traces of service with a span named operation, the
// newest first, within the last hour.
func (j *Jaeger) Find(ctx context.Context, service, operation string) ([]Trace, error) {
	return j.traces(ctx, "/api/traces?service="+service+"&operation="+operation+"&lookback=1h&limit=100")
}

func (j *Jaeger) traces(ctx context.Context, path string) ([]Trace, error) {
	body, err := j.get(ctx, path)
	if err != nil {
		return nil, err
	}
	var r struct{ Data []Trace }
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("jaeger %s: %w", path, err)
	}
	return r.Data, nil
}

func (j *Jaeger) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+path, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode == http.StatusNotFound {
		return nil, ErrNotFound
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaeger %s: HTTP %d: %.200s", path, res.StatusCode, b)
	}
	return b, nil
}
