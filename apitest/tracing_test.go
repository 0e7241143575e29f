package apitest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/payment"
	"chargeonce/tracing/tracingtest"
)

// The tracing half of issue 35 in process: the spans a charge makes, under
// the caller's trace, exported to a collector that keeps the traces the
// tests ask for (Jaeger, in systest, sees the same over OTLP).

func TestTracing_ACharge_OneTraceUnderTheCallersTraceparent(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := StartOn(t, dbURL, nil)
	tr := tracingtest.Watch()
	id, traceparent := tr.ID, tr.Traceparent()
	key := NewKey()
	r := s.Post(t, "demo-key", http.Header{"Traceparent": {traceparent}, "X-Request-Id": {"trace-req-1"}},
		ChargeCardMutation, map[string]any{"key": key, "input": Visa(1999)}, nil)
	require.Equal(t, "SUCCEEDED", r.GQL(t).Data.ChargeCard.Status)
	require.Equal(t, id.String(), r.Header.Get("X-Trace-Id"), "the caller's trace")
	require.True(t, strings.HasPrefix(r.Header.Get("traceresponse"), "00-"+id.String()+"-"), r.Header.Get("traceresponse"))

	var got map[string][]sdktrace.ReadOnlySpan
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got = tr.Spans()
		for _, name := range []string{"POST /graphql", "payment.claim", "payment.provider", "payment.finalize", "relay.publish"} {
			require.NotEmpty(c, got[name], "no %s span", name)
		}
	}, 10*time.Second, 20*time.Millisecond)
	server := got["POST /graphql"][0]
	require.Equal(t, tr.Parent, server.Parent().SpanID(), "the server's span is the caller's child")
	for _, name := range []string{"payment.claim", "payment.provider", "payment.finalize"} {
		require.Equal(t, server.SpanContext().SpanID(), got[name][0].Parent().SpanID(), "%s is the request's", name)
	}
	publish := got["relay.publish"][0]
	require.Equal(t, got["payment.finalize"][0].SpanContext().SpanID(), publish.Parent().SpanID(),
		"the publication follows the write of its event")
	attrs := map[string]string{}
	for _, kv := range got["payment.provider"][0].Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, "create_charge", attrs["chargeonce.provider_operation"])
	require.True(t, strings.HasPrefix(attrs["chargeonce.provider_key"], "chargeonce_"), attrs["chargeonce.provider_key"])

	// No span holds a secret or a card token.
	for _, list := range got {
		for _, sp := range list {
			raw, err := json.Marshal(sp.Attributes())
			require.NoError(t, err)
			for _, secret := range []string{"demo-key", "pm_card_visa"} {
				require.NotContains(t, string(raw), secret, "span %s", sp.Name())
			}
		}
	}

	// The key's history names the request and the trace.
	rows, err := s.API("demo-key").History(context.Background(), apiclient.AttemptKindCharge, key)
	require.NoError(t, err)
	require.Equal(t, "request.claimed", rows[0].Type)
	require.Equal(t, "trace-req-1", *rows[0].RequestId)
	require.Equal(t, id.String(), *rows[0].TraceId)

	// The event names the request, as Stripe's do, and carries the trace.
	var body []byte
	var traceparentStored *string
	require.NoError(t, dbtest.Open(t, dbURL).QueryRow(context.Background(),
		"SELECT charge_event_body(charge_events), traceparent FROM charge_events WHERE idempotency_key = $1", key).Scan(&body, &traceparentStored))
	e, err := payment.ParseEvent(body)
	require.NoError(t, err)
	require.Equal(t, "trace-req-1", *e.Request.ID)
	require.Equal(t, key, *e.Request.IdempotencyKey)
	require.NotNil(t, traceparentStored)
	require.Contains(t, *traceparentStored, id.String())

	// The request's latency carries the trace as an exemplar.
	metricsReq, err := http.NewRequest(http.MethodGet, s.URL+"/metrics", nil)
	require.NoError(t, err)
	metricsReq.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	res, err := s.Client.Do(metricsReq)
	require.NoError(t, err)
	defer res.Body.Close()
	text, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Contains(t, string(text), `trace_id="`+id.String()+`"`)
}
