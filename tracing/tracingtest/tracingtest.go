// Package tracingtest turns tracing on for a test binary and keeps the
// spans of the traces its tests watch, so that tests running in parallel
// each read their own trace's spans and nothing else is kept.
package tracingtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"chargeonce/tracing"
)

// collector keeps the ended spans of the watched traces, and the spans of
// other traces that link to one (a reconciler's, linking to the claim).
type collector struct {
	mu    sync.Mutex
	spans map[trace.TraceID][]sdktrace.ReadOnlySpan
}

func (c *collector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *collector) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if list, ok := c.spans[s.SpanContext().TraceID()]; ok {
		c.spans[s.SpanContext().TraceID()] = append(list, s)
		return
	}
	for _, l := range s.Links() {
		if list, ok := c.spans[l.SpanContext.TraceID()]; ok {
			c.spans[l.SpanContext.TraceID()] = append(list, s)
		}
	}
}
func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

var (
	once   sync.Once
	spans  = &collector{spans: map[trace.TraceID][]sdktrace.ReadOnlySpan{}}
	parent = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
)

// Trace is a trace a test watches, begun by a caller outside chargeonce.
type Trace struct {
	ID trace.TraceID
	// Parent is the caller's span, every server span's parent.
	Parent trace.SpanID
}

// Watch turns tracing on for the whole test binary (once: the global
// tracer provider records every span from then on, and keeps the watched
// traces' spans) and starts watching a new trace.
func Watch() Trace {
	once.Do(func() { tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))) })
	var id trace.TraceID
	_, _ = rand.Read(id[:])
	spans.mu.Lock()
	spans.spans[id] = nil
	spans.mu.Unlock()
	return Trace{ID: id, Parent: parent}
}

// Traceparent is the caller's traceparent header in t.
func (t Trace) Traceparent() string { return fmt.Sprintf("00-%s-%s-01", t.ID, t.Parent) }

// Context is ctx in t, as a request that came with its traceparent.
func (t Trace) Context(ctx context.Context) context.Context {
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: t.ID, SpanID: t.Parent, TraceFlags: trace.FlagsSampled, Remote: true}))
}

// Spans are t's ended spans by name, with those of other traces that link
// to it.
func (t Trace) Spans() map[string][]sdktrace.ReadOnlySpan {
	spans.mu.Lock()
	defer spans.mu.Unlock()
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans.spans[t.ID] {
		out[s.Name()] = append(out[s.Name()], s)
	}
	return out
}
