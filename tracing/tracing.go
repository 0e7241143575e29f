// Package tracing sets chargeonce up for OpenTelemetry tracing: one trace
// per payment, from the checkout page's traceparent through the claim, the
// provider call, the finalizing write, the relay's publication and each
// webhook attempt, exported with OTLP over HTTP. It is configured by the
// standard OTEL_* variables and off unless an OTLP endpoint is named: then
// no tracer provider is installed, the global one stays OpenTelemetry's
// no-op, and tracing costs nothing. The W3C trace context propagator is
// installed either way, so that a caller's traceparent reaches the history
// of its key, the outbox and the webhooks even when nothing is exported.
//
// It also carries a trace context where a context cannot go: stored with
// an outbox event (Traceparent, ContextFrom) and in a message's headers.
package tracing

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Propagator is the W3C trace context propagator chargeonce reads and
// writes traceparent and tracestate with.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Enabled reports whether getenv's OTEL_* variables ask for traces to be
// exported: an OTLP endpoint is named (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and neither OTEL_SDK_DISABLED=true
// nor OTEL_TRACES_EXPORTER=none turns them off.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return cmp.Or(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != ""
}

// Setup installs the propagator and, when Enabled, a tracer provider that
// exports over OTLP/HTTP in batches, named by OTEL_SERVICE_NAME (default
// chargeonce) and instance. The exporter reads the rest of OTEL_* itself
// (endpoint, headers, timeout, the sampler). shutdown flushes what is
// left; it does nothing when tracing is off.
func Setup(ctx context.Context, getenv func(string) string, instance, version string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(Propagator)
	if !Enabled(getenv) {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(cmp.Or(getenv("OTEL_SERVICE_NAME"), "chargeonce")),
		semconv.ServiceInstanceID(instance),
		semconv.ServiceVersion(cmp.Or(version, "dev")),
	))
	if err != nil {
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	Use(tp)
	return tp.Shutdown, nil
}

// Use installs tp as the global tracer provider, which records spans:
// Setup's, or a test's.
func Use(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	recording.Store(true)
}

// recording says whether Use installed a tracer provider: Handler makes
// server spans only then.
var recording atomic.Bool

// Tracer is chargeonce's tracer for the component name ("payment",
// "relay", …), from the global provider: the no-op one when tracing is off.
func Tracer(name string) trace.Tracer { return otel.Tracer("chargeonce/" + name) }

// Traceparent is ctx's W3C trace context as its two headers, traceparent
// and tracestate; "" when ctx is in no trace.
func Traceparent(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	carrier := propagation.MapCarrier{}
	Propagator.Inject(ctx, carrier)
	return carrier["traceparent"], carrier["tracestate"]
}

// ContextFrom is ctx carrying the remote trace context traceparent (and
// tracestate), as stored with an event; ctx itself when there is none.
func ContextFrom(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

// Attributes every span of an attempt carries.
const (
	KeyKind           = attribute.Key("chargeonce.kind")
	KeyIdempotencyKey = attribute.Key("chargeonce.idempotency_key")
	KeyAttemptID      = attribute.Key("chargeonce.attempt_id")
	KeyMerchantID     = attribute.Key("chargeonce.merchant_id")
	KeyProviderKey    = attribute.Key("chargeonce.provider_key")
	KeyRequestID      = attribute.Key("chargeonce.request_id")
)

// Handler traces h's requests: it continues the caller's trace from its
// traceparent (and tracestate), or starts one, with a server span named
// name, and answers every request that is in a trace with the trace's id
// twice: X-Trace-Id (its 32 hex digits) and the W3C traceresponse
// (00-trace-span-flags, the span this server answered from). While
// no tracer provider is installed (Use), it makes no span and starts no trace: it only
// carries the caller's trace context on, and answers with it, at the
// cost of reading two headers.
func Handler(name string, h http.Handler) http.Handler {
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
			w.Header().Set("X-Trace-Id", sc.TraceID().String())
			w.Header().Set("traceresponse", fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags()))
		}
		h.ServeHTTP(w, r)
	})
	traced := otelhttp.NewHandler(answer, name, otelhttp.WithPropagators(Propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + name }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if recording.Load() {
			traced.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("traceparent") != "" {
			r = r.WithContext(Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		answer.ServeHTTP(w, r)
	})
}
