package systest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/events/eventstest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/jaeger"
	"chargeonce/payment"
)

// One trace per payment, seen in a real tracing backend: Jaeger's
// all-in-one (tools/jaeger), read through its HTTP query API.

// The Jaeger binary, built once per test run (bin/jaeger, kept between
// runs until tools/jaeger changes).
var (
	jaegerOnce sync.Once
	jaegerBin  string
	jaegerErr  error
)

// startJaeger starts a Jaeger of the test's own.
func startJaeger(t *testing.T) *jaeger.Jaeger {
	t.Helper()
	jaegerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		jaegerBin, jaegerErr = jaeger.Binary(ctx)
	})
	require.NoError(t, jaegerErr, "Jaeger is built from tools/jaeger, from the Go module proxy")
	j, err := jaeger.Start(t.Context(), jaegerBin)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Kill() })
	return j
}

// tracedEnv is env with the server exporting to j, in batches of a tenth
// of a second.
func tracedEnv(j *jaeger.Jaeger, env map[string]string) map[string]string {
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": j.OTLP, "OTEL_BSP_SCHEDULE_DELAY": "100"}
	for k, v := range env {
		vars[k] = v
	}
	return vars
}

// newTraceparent is a caller's trace: its id, and its traceparent.
func newTraceparent(t *testing.T) (traceID, traceparent string) {
	t.Helper()
	b := make([]byte, 24)
	_, err := rand.Read(b)
	require.NoError(t, err)
	traceID = hex.EncodeToString(b[:16])
	return traceID, fmt.Sprintf("00-%s-%s-01", traceID, hex.EncodeToString(b[16:]))
}

func TestTracing_OneCharge_OneTraceInJaeger_FromTheCallerToTheWebhook(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	j := startJaeger(t)
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, tracedEnv(j, map[string]string{"DATABASE_URL": dbURL, "NATS_URL": eventstest.New(t).URL()}))

	var mu sync.Mutex
	var hooks []http.Header
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		hooks = append(hooks, r.Header.Clone())
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	webhookCommand(t, dbURL, nil)("set", "demo", receiver.URL+"/hook").requireOK(t)

	traceID, traceparent := newTraceparent(t)
	key := newKey()
	var answered http.Header
	client := s.demo().With("traceparent", traceparent).With("X-Request-Id", "traced-charge-1")
	client.HTTP = &http.Client{Transport: headerSpy{next: http.DefaultTransport, seen: &answered}}
	r, err := client.ChargeCard(t.Context(), key, visa(1999))
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", string(r.Status))
	require.Equal(t, traceID, answered.Get("X-Trace-Id"))

	var tr jaeger.Trace
	want := []string{"POST /graphql", "payment.claim", "payment.provider", "payment.finalize", "relay.publish", "webhook.attempt"}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		tr, err = j.Trace(t.Context(), traceID)
		require.NoError(c, err)
		for _, op := range want {
			require.NotEmpty(c, tr.Named(op), "no %s span in the trace", op)
		}
	}, 60*time.Second, 200*time.Millisecond)
	server := tr.Named("POST /graphql")[0]
	require.Equal(t, traceparent[36:52], server.Parent(), "the server's span is the caller's child")
	finalize := tr.Named("payment.finalize")[0]
	for _, op := range []string{"payment.claim", "payment.provider", "payment.finalize"} {
		require.Equal(t, server.SpanID, tr.Named(op)[0].Parent(), "%s belongs to the request", op)
	}
	publish := tr.Named("relay.publish")[0]
	require.Equal(t, finalize.SpanID, publish.Parent(), "the event is published in the trace of its write")
	attempt := tr.Named("webhook.attempt")[0]
	require.Equal(t, publish.SpanID, attempt.Parent(), "the webhook attempt follows the published message")
	require.True(t, strings.HasPrefix(fmt.Sprint(tr.Named("payment.provider")[0].Tag("chargeonce.provider_key")), "chargeonce_"),
		"the provider call names its provider key")
	t.Logf("Jaeger's trace %s: %s", traceID, operations(tr))

	// The merchant's handler was sent the trace, and the event names the request.
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, hooks)
	require.Contains(t, hooks[0].Get("traceparent"), traceID, "the webhook continues the checkout's trace")
	rows, err := s.demo().History(t.Context(), apiclient.AttemptKindCharge, key)
	require.NoError(t, err)
	require.Equal(t, traceID, *rows[0].TraceId)
	body := dbtest.Query[[]byte](t, dbtest.Open(t, dbURL), "SELECT charge_event_body(charge_events) FROM charge_events WHERE idempotency_key = $1", key)
	require.Len(t, body, 1)
	e, err := payment.ParseEvent(body[0])
	require.NoError(t, err)
	require.Equal(t, "traced-charge-1", *e.Request.ID)
	require.Equal(t, key, *e.Request.IdempotencyKey)
}

func TestTracing_KilledAfterTheProvider_TheReconcilersSpanLinksToTheCheckout(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	j := startJaeger(t)
	dbURL := dbtest.NewDatabase(t)
	provider := startServer(t, map[string]string{"DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1h"})
	env := tracedEnv(j, map[string]string{"DATABASE_URL": dbURL, "PROVIDER_URL": provider.URL + "/provider"})

	traceID, traceparent := newTraceparent(t)
	doomed := startServer(t, withCrash(env, "after-provider"))
	key := newKey()
	_, err := doomed.demo().With("traceparent", traceparent).ChargeCard(t.Context(), key, visa(1999))
	requireConnectionDied(t, err)
	requireKilled(t, doomed.Process, 10*time.Second, "the server died of SIGKILL after the provider call")

	survivor := startServer(t, env)
	require.Equal(t, "SUCCEEDED", survivor.finalStatus(t, key, 15*time.Second).Status)

	var linked jaeger.Span
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		traces, err := j.Find(t.Context(), "chargeonce", "reconciler.attempt")
		require.NoError(c, err)
		for _, tr := range traces {
			for _, s := range tr.Named("reconciler.attempt") {
				for _, ref := range s.References {
					if ref.TraceID == traceID {
						linked = s
						return
					}
				}
			}
		}
		require.Fail(c, "no reconciler.attempt span links to the checkout's trace yet")
	}, 60*time.Second, 200*time.Millisecond)
	require.NotEqual(t, traceID, linked.TraceID, "the reconciler's work is a trace of its own, linked")
	require.Equal(t, key, linked.Tag("chargeonce.idempotency_key"))
	t.Logf("reconciler.attempt %s/%s links to the checkout's trace %s", linked.TraceID, linked.SpanID, traceID)
}

// headerSpy keeps the headers of the last answer.
type headerSpy struct {
	next http.RoundTripper
	seen *http.Header
}

func (h headerSpy) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := h.next.RoundTrip(r)
	if err == nil {
		*h.seen = res.Header.Clone()
	}
	return res, err
}

// operations lists tr's spans as operation (parent → span) for the log.
func operations(tr jaeger.Trace) string {
	var b strings.Builder
	for _, s := range tr.Spans {
		fmt.Fprintf(&b, "\n  %-16s span %s parent %s", s.Operation, s.SpanID, s.Parent())
	}
	return b.String()
}
