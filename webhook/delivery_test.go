package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"chargeonce/loop"
	"chargeonce/loop/looptest"
	"chargeonce/metrics"
	"chargeonce/payment"
	"chargeonce/webhook/webhooktest"
)

func TestDelivery_ReceiverFailsTwice_EveryEventArrivesOnTheThirdAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.merchant(t, "shop")
	var mu sync.Mutex
	tries := map[string]int{}
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, body []byte) {
		var e struct{ ID string }
		_ = json.Unmarshal(body, &e)
		mu.Lock()
		tries[e.ID]++
		n := tries[e.ID]
		mu.Unlock()
		if n <= 2 {
			http.Error(w, "not yet", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	secret := b.set(t, "shop", rc.URL+"/hooks?source=chargeonce")
	reg := prometheus.NewRegistry()
	cfg := testConfig()
	cfg.Metrics = metrics.New(reg)
	b.start(t, cfg)

	events := []payment.Event{newEvent(shop), newEvent(shop), newEvent(shop)}
	events[1].Type, events[1].Charge = payment.EventChargeFailed, nil
	events[1].Failure = &payment.EventFailure{Code: "card_declined", Message: "The card was declined."}
	bodies := map[string][]byte{}
	for _, e := range events {
		webhooktest.Publish(t, b.js, e)
		body, err := json.Marshal(e)
		require.NoError(t, err)
		bodies[e.ID.String()] = body
	}
	waitFor(t, eventually, "every event delivered", func() bool {
		return b.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'") == len(events)
	})

	got := rc.got()
	require.Len(t, got, 3*len(events), "two failures and a success per event")
	for _, r := range got {
		id := r.eventID(t)
		require.Equal(t, bodies[id], r.body, "the body is the event's JSON, byte for byte")
		require.Equal(t, http.MethodPost, r.method)
		require.Equal(t, "/hooks?source=chargeonce", r.url)
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		require.Contains(t, r.header.Get("User-Agent"), "chargeonce")
		require.Equal(t, id, r.header.Get(EventIDHeader))
		var e payment.Event
		require.NoError(t, json.Unmarshal(r.body, &e))
		require.Equal(t, e.Type, r.header.Get(EventTypeHeader))
		// The signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>.
		sig := r.header.Get(SignatureHeader)
		ts, _, found := strings.Cut(strings.TrimPrefix(sig, "t="), ",v1=")
		require.True(t, found, sig)
		unix, err := strconv.ParseInt(ts, 10, 64)
		require.NoError(t, err)
		require.Equal(t, Sign(secret, time.Unix(unix, 0), r.body), sig)
		require.WithinDuration(t, r.at, time.Unix(unix, 0), 5*time.Second, "signed at the attempt")
	}

	log := b.deliveries(t, "shop")
	require.Len(t, log, 3*len(events), "the log holds every attempt")
	for _, e := range events {
		var statuses []int
		var attempts []int
		for _, l := range log {
			if l.EventID == e.ID {
				require.Equal(t, stateDelivered, l.State)
				require.Equal(t, e.Type, l.EventType)
				require.Empty(t, l.Error)
				require.False(t, l.StartedAt.IsZero())
				attempts = append(attempts, l.Attempt)
				statuses = append(statuses, l.HTTPStatus)
			}
		}
		require.Equal(t, []int{3, 2, 1}, attempts, "newest first")
		require.Equal(t, []int{204, 500, 500}, statuses)
	}
	require.Equal(t, 3.0, testutil.ToFloat64(cfg.Metrics.WebhookDeliveries.WithLabelValues("delivered")))
	require.Equal(t, 0.0, testutil.ToFloat64(cfg.Metrics.WebhookDeliveries.WithLabelValues("failed")))
	require.Equal(t, uint64(3), histogramCount(t, reg, "chargeonce_webhook_attempt_duration_seconds", "delivered"))
	require.Equal(t, uint64(6), histogramCount(t, reg, "chargeonce_webhook_attempt_duration_seconds", "http_error"))
	require.Equal(t, 0.0, gaugeValue(t, reg, "chargeonce_webhook_pending_deliveries"))
	require.NotContains(t, b.log.String(), secret, "the secret is never logged")
}

func TestDelivery_SlowEndpoint_DoesNotDelayOtherMerchants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	slowShop, fastShop := b.merchant(t, "slow"), b.merchant(t, "fast")
	var order arrivals
	fastGotAll := make(chan struct{})
	var inSlow, maxInSlow atomic.Int32
	slow := newReceiver(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		n := inSlow.Add(1)
		defer inSlow.Add(-1)
		for m := maxInSlow.Load(); n > m && !maxInSlow.CompareAndSwap(m, n); m = maxInSlow.Load() {
		}
		id := r.Header.Get(EventIDHeader)
		order.add("slow start " + id)
		// A slow endpoint: it answers once the fast one has all its events,
		// or after 20s (which a worker that waited for it would take).
		select {
		case <-fastGotAll:
		case <-time.After(20 * time.Second):
		}
		order.add("slow end " + id)
		w.WriteHeader(http.StatusOK)
	})
	var fastCount atomic.Int32
	fast := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		order.add("fast " + r.Header.Get(EventIDHeader))
		if fastCount.Add(1) == 3 {
			close(fastGotAll)
		}
		w.WriteHeader(http.StatusOK)
	})
	b.set(t, "slow", slow.URL)
	b.set(t, "fast", fast.URL)
	cfg := testConfig()
	cfg.Timeout, cfg.Concurrency = time.Minute, 4
	b.start(t, cfg)

	slow1, slow2 := newEvent(slowShop), newEvent(slowShop)
	webhooktest.Publish(t, b.js, slow1)
	webhooktest.Publish(t, b.js, slow2)
	waitFor(t, eventually, "the slow endpoint is sent its first event", func() bool { return len(slow.got()) == 1 })
	for range 3 {
		webhooktest.Publish(t, b.js, newEvent(fastShop))
	}
	waitFor(t, eventually, "every event delivered", func() bool {
		return b.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'") == 5
	})

	seq := order.list()
	slowEnd := slices.Index(seq, "slow end "+slow1.ID.String())
	require.Positive(t, slowEnd, "%v", seq)
	for i, s := range seq {
		if strings.HasPrefix(s, "fast ") {
			require.Less(t, i, slowEnd, "the fast merchant got its events while the slow endpoint held the first: %v", seq)
		}
	}
	require.Equal(t, int32(1), maxInSlow.Load(), "one request at a time to an endpoint")
	require.Greater(t, slices.Index(seq, "slow start "+slow2.ID.String()), slowEnd, "%v", seq)
	require.Len(t, slow.got(), 2)
	require.Len(t, fast.got(), 3)
}

// arrivals is the order in which receivers saw things.
type arrivals struct {
	mu  sync.Mutex
	seq []string
}

func (a *arrivals) add(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq = append(a.seq, s)
}

func (a *arrivals) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seq)
}

func TestDelivery_MaxAgePassed_IsMarkedFailedAndLoggedAtWarn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.merchant(t, "shop")
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	b.set(t, "shop", rc.URL)
	reg := prometheus.NewRegistry()
	cfg := testConfig()
	cfg.MaxAge, cfg.Metrics = 2*time.Second, metrics.New(reg) // three days in production
	cfg.WorkerPasses = &loop.Passes{}
	b.start(t, cfg)

	e := newEvent(shop)
	queued := time.Now()
	webhooktest.Publish(t, b.js, e)
	waitFor(t, eventually, "the delivery is given up", func() bool {
		return b.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'failed'") == 1
	})
	log := b.deliveries(t, "shop")
	require.GreaterOrEqual(t, len(log), 3, "retried until the maximum age")
	require.Equal(t, stateFailed, log[0].State)
	require.Equal(t, http.StatusServiceUnavailable, log[0].HTTPStatus)
	require.GreaterOrEqual(t, log[0].StartedAt.Sub(queued), time.Second, "the last attempt came near the maximum age")
	require.Contains(t, b.log.String(), "level=WARN msg=\"webhook delivery failed: no attempt succeeded within the maximum age; given up\"")
	require.Equal(t, 1.0, testutil.ToFloat64(cfg.Metrics.WebhookDeliveries.WithLabelValues("failed")))
	attempts := len(rc.got())
	require.Equal(t, len(log), attempts, "every attempt is logged")
	// Two passes that finished after the largest backoff (the second began
	// after it) looked for due deliveries, and found none: no attempt after
	// giving up.
	gaveUp := time.Now()
	passes := looptest.WaitFor(t, cfg.WorkerPasses, 2, func(loop.Pass) bool { return time.Since(gaveUp) > cfg.BackoffMax })
	for _, p := range passes {
		require.NoError(t, p.Err)
		require.Equal(t, 0, p.Next.Result, "nothing was due")
	}
	require.Len(t, rc.got(), attempts)
}

func TestDelivery_ProductionRefusesHTTP_RecordedAsAFailedAttemptNeverSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.merchant(t, "shop")
	rc := newReceiver(t, ok)

	_, _, err := NewEndpoints(b.pool, Config{Production: true}).Set(context.Background(), "shop", rc.URL)
	require.ErrorIs(t, err, ErrInvalidURL)
	require.ErrorContains(t, err, "https:// when APP_ENV=production")

	// Registered in development (or before production refused it); the
	// worker refuses it again.
	b.set(t, "shop", rc.URL)
	cfg := testConfig()
	cfg.Production = true
	b.start(t, cfg)
	webhooktest.Publish(t, b.js, newEvent(shop))
	waitFor(t, eventually, "two refused attempts", func() bool { return len(b.deliveries(t, "shop")) >= 2 })
	for _, l := range b.deliveries(t, "shop") {
		require.Equal(t, statePending, l.State, "retried: the operator may set an https URL")
		require.Zero(t, l.HTTPStatus)
		require.Equal(t, "not sent: invalid webhook URL: it must be https:// when APP_ENV=production", l.Error)
	}
	require.Empty(t, rc.got(), "nothing is sent to a refused URL")
}

func TestDelivery_RedirectIsNotFollowed_TimeoutAndRefusedConnectionAreRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := newReceiver(t, ok)
	redirecting := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	})
	release := make(chan struct{})
	hanging := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		<-release
	})
	t.Cleanup(func() { close(release) }) // before the receiver closes: cleanups run last in, first out
	closed := newReceiver(t, ok)
	closed.Close() // connection refused

	cases := map[string]string{"redirect": redirecting.URL, "hang": hanging.URL, "closed": closed.URL}
	merchants := map[string]uuid.UUID{}
	for name, url := range cases {
		merchants[name] = b.merchant(t, name)
		b.set(t, name, url)
	}
	cfg := testConfig()
	cfg.Timeout = 500 * time.Millisecond
	b.start(t, cfg)
	for name := range cases {
		webhooktest.Publish(t, b.js, newEvent(merchants[name]))
	}
	for name := range cases {
		waitFor(t, eventually, name+": two attempts", func() bool { return len(b.deliveries(t, name)) >= 2 })
	}
	require.Empty(t, target.got(), "the redirect is not followed")
	for _, l := range b.deliveries(t, "redirect") {
		require.Equal(t, http.StatusTemporaryRedirect, l.HTTPStatus)
	}
	for _, l := range b.deliveries(t, "hang") {
		require.Zero(t, l.HTTPStatus)
		require.Equal(t, "no answer within the timeout", l.Error)
		require.GreaterOrEqual(t, l.Duration, 400*time.Millisecond)
	}
	for _, l := range b.deliveries(t, "closed") {
		require.Zero(t, l.HTTPStatus)
		require.Contains(t, l.Error, "connection refused")
		require.NotContains(t, l.Error, "http://", "the URL is not in the log")
		require.Equal(t, statePending, l.State)
	}
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name, result string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
