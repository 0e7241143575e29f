package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestEnabled_OnlyWhenAnEndpointIsNamed(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		getenv func(string) string
		want   bool
	}{
		"nothing set":              {env(), false},
		"a service name alone":     {env("OTEL_SERVICE_NAME", "x"), false},
		"an endpoint":              {env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), true},
		"a traces endpoint":        {env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"), true},
		"the SDK disabled":         {env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_SDK_DISABLED", "true"), false},
		"the traces exporter none": {env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_TRACES_EXPORTER", "none"), false},
		"the traces exporter otlp": {env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_TRACES_EXPORTER", "otlp"), true},
	} {
		require.Equal(t, tt.want, Enabled(tt.getenv), name)
	}
}

// Not parallel: it reads the global tracer provider.
func TestSetup_Off_InstallsNoProviderAndCostsNothing(t *testing.T) {
	shutdown, err := Setup(context.Background(), env(), "i-1", "")
	require.NoError(t, err)
	require.NoError(t, shutdown(context.Background()))
	_, sdk := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	require.False(t, sdk, "no SDK provider: the no-op one")
	_, span := Tracer("test").Start(context.Background(), "x")
	require.False(t, span.IsRecording(), "spans record nothing")
}

func TestHandler_AnswersTheCallersTrace_EvenWithTracingOff(t *testing.T) {
	t.Parallel()
	var seen trace.SpanContext
	h := Handler("/graphql", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = trace.SpanContextFromContext(r.Context())
	}))
	req := httptest.NewRequest(http.MethodPost, "/graphql", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", rec.Header().Get("X-Trace-Id"))
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", rec.Header().Get("traceresponse"))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", seen.TraceID().String(), "the request's context is in the caller's trace")

	// No traceparent and tracing off: no trace to answer.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/graphql", nil))
	require.Empty(t, rec.Header().Get("X-Trace-Id"))
	require.Empty(t, rec.Header().Get("traceresponse"))

	// A malformed traceparent is ignored, not an error.
	req = httptest.NewRequest(http.MethodPost, "/graphql", nil)
	req.Header.Set("traceparent", "00-zz-00f067aa0ba902b7-01")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Empty(t, rec.Header().Get("X-Trace-Id"))
}

func TestTraceparent_RoundTripsThroughAStoredEvent(t *testing.T) {
	t.Parallel()
	ctx := ContextFrom(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=x")
	tp, ts := Traceparent(ctx)
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tp)
	require.Equal(t, "vendor=x", ts)
	tp, ts = Traceparent(ContextFrom(context.Background(), "", ""))
	require.Empty(t, tp)
	require.Empty(t, ts)
}
