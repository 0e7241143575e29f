package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/webhook/webhooktest"
)

func TestWorker_CrashedWorkersDelivery_IsTakenAgainAfterItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.merchant(t, "shop")
	rc := newReceiver(t, ok)
	b.set(t, "shop", rc.URL)
	cfg := testConfig()
	cfg.Timeout, cfg.Lease = 500*time.Millisecond, 2*time.Second
	s := b.newService(t, cfg)
	ctx := context.Background()

	e := newEvent(shop)
	queued, err := s.store.insertDelivery(ctx, e, []byte(`{}`), time.Now())
	require.NoError(t, err)
	require.True(t, queued)
	// A worker takes it and dies before it sends.
	now := time.Now()
	taken, err := s.store.takeDue(ctx, now, now.Add(cfg.Lease), nil, 10)
	require.NoError(t, err)
	require.Len(t, taken, 1)
	require.Equal(t, 1, taken[0].attempt)
	again, err := s.store.takeDue(ctx, now, now.Add(cfg.Lease), nil, 10)
	require.NoError(t, err)
	require.Empty(t, again, "leased: nobody else takes it")

	b.run(t, s)
	waitFor(t, eventually, "delivered after the lease", func() bool { return len(rc.got()) == 1 })
	require.GreaterOrEqual(t, rc.got()[0].at.Sub(now), cfg.Lease-100*time.Millisecond, "not before the lease ended")
	waitFor(t, eventually, "recorded", func() bool {
		return b.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'") == 1
	})
	log := b.deliveries(t, "shop")
	require.Len(t, log, 1)
	require.Equal(t, 2, log[0].Attempt, "the dead worker's attempt counts")
}

func TestWorker_TwoInstances_SendEachDeliveryOnceAndOneAtATimePerEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const merchants, perMerchant = 4, 6
	var mu sync.Mutex
	seen := map[string]int{}
	var ids []uuid.UUID
	inFlight := make([]atomic.Int32, merchants)
	var overlapped atomic.Bool
	for i := range merchants {
		name := fmt.Sprintf("shop%d", i)
		ids = append(ids, b.merchant(t, name))
		rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			if inFlight[i].Add(1) > 1 {
				overlapped.Store(true)
			}
			defer inFlight[i].Add(-1)
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			seen[r.Header.Get(EventIDHeader)]++
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
		})
		b.set(t, name, rc.URL)
	}
	cfg := testConfig()
	cfg.Concurrency = 3
	b.start(t, cfg)
	b.start(t, cfg)
	for range perMerchant {
		for _, id := range ids {
			webhooktest.Publish(t, b.js, newEvent(id))
		}
	}
	waitFor(t, eventually, "every event delivered", func() bool {
		return b.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'") == merchants*perMerchant
	})
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, merchants*perMerchant)
	for id, n := range seen {
		require.Equal(t, 1, n, "event %s sent once", id)
	}
	require.False(t, overlapped.Load(), "an endpoint never had two requests at once")
	require.Equal(t, merchants*perMerchant, b.count(t, "SELECT count(*) FROM webhook_attempts"))
}

func TestCleaner_ForgetsFinishedDeliveriesAfterRetention_NeverPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.merchant(t, "shop")
	b.set(t, "shop", "http://127.0.0.1:9/never")
	ctx := context.Background()
	s := b.newService(t, testConfig())
	old := time.Now().Add(-40 * 24 * time.Hour)
	finish := func(state string, at time.Time) uuid.UUID {
		e := newEvent(shop)
		_, err := s.store.insertDelivery(ctx, e, []byte(`{}`), at)
		require.NoError(t, err)
		if state == statePending {
			return e.ID
		}
		ds, err := s.store.takeDue(ctx, at, at.Add(time.Minute), nil, 1)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		current, err := s.store.record(ctx, ds[0], outcome{startedAt: at, httpStatus: 200, state: state, now: at})
		require.NoError(t, err)
		require.True(t, current)
		return e.ID
	}
	oldDelivered, oldFailed := finish(stateDelivered, old), finish(stateFailed, old)
	oldPending := finish(statePending, old)
	recent := finish(stateDelivered, time.Now().Add(-time.Hour))

	n, err := s.CleanOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for id, kept := range map[uuid.UUID]bool{oldDelivered: false, oldFailed: false, oldPending: true, recent: true} {
		require.Equal(t, kept, b.count(t, "SELECT count(*) FROM webhook_deliveries WHERE event_id = $1", id) == 1, "%s", id)
	}
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM webhook_attempts"), "the attempts went with their deliveries")
}

func TestBackoff_DoublesFromTheBaseWithJitter_UpToTheCap(t *testing.T) {
	t.Parallel()
	base, most := 10*time.Second, time.Hour
	for attempt, want := range map[int]time.Duration{
		1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 4: 80 * time.Second, 9: 2560 * time.Second,
	} {
		require.Equal(t, want, backoff(attempt, base, most, 0.5), "attempt %d without jitter", attempt)
		require.Equal(t, want*8/10, backoff(attempt, base, most, 0), "attempt %d, least jitter", attempt)
		require.InEpsilon(t, float64(want*12/10), float64(backoff(attempt, base, most, 0.999999)), 1e-5)
	}
	for _, attempt := range []int{10, 11, 50, 1000} {
		require.Equal(t, most, backoff(attempt, base, most, 0.5), "attempt %d is capped", attempt)
		require.LessOrEqual(t, backoff(attempt, base, most, 0.99), most)
	}
}

func TestSign_KnownVector(t *testing.T) {
	t.Parallel()
	// printf '1700000000.{"id":"x"}' | openssl dgst -sha256 -hmac whsec_test
	require.Equal(t, "t=1700000000,v1=80e8d098018f757aa814ab1abb924f35d304affa1d93d29611a54696207eb7c3",
		Sign("whsec_test", time.Unix(1700000000, 0), []byte(`{"id":"x"}`)))
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	long := "https://example.com/" + string(make([]byte, maxURLLength))
	for _, tc := range []struct {
		url        string
		production bool
		refused    string // "" when accepted
	}{
		{"https://hooks.example.com/chargeonce?tenant=7", true, ""},
		{"http://127.0.0.1:8081/hooks", false, ""},
		{"http://127.0.0.1:8081/hooks", true, "https:// when APP_ENV=production"},
		{"HTTPS://Hooks.Example.com/x", true, ""},
		{"/hooks", false, "absolute http:// or https://"},
		{"hooks.example.com/x", false, "absolute http:// or https://"},
		{"ftp://example.com/x", false, "absolute http:// or https://"},
		{"https:///x", false, "no host"},
		{"https:opaque", false, "no host"},
		{"https://user:secret@example.com/x", false, "credentials"},
		{"https://example.com/x#frag", false, "fragment"},
		{"https://exa mple.com/", false, "does not parse"},
		{long, false, "longer than"},
	} {
		_, err := CheckURL(tc.url, tc.production)
		if tc.refused == "" {
			require.NoError(t, err, tc.url)
			continue
		}
		require.ErrorIs(t, err, ErrInvalidURL, tc.url)
		require.ErrorContains(t, err, tc.refused, tc.url)
		require.NotContains(t, err.Error(), "secret", "the URL is not quoted")
	}
}

func TestConfig_Validation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Timeout: time.Minute, Lease: 30 * time.Second}, "must be longer than the request timeout"},
		{Config{BackoffBase: time.Hour, BackoffMax: time.Minute}, "shorter than its base"},
		{Config{MaxAge: -time.Second}, "MaxAge must not be negative"},
		{Config{Concurrency: -1}, "Concurrency must not be negative"},
	} {
		_, err := New(nil, nil, nil, tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
	c, err := Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, TimeoutDefault+time.Minute, c.Lease)
	require.Equal(t, 72*time.Hour, c.MaxAge)
}

func TestWorker_EndpointRemovedDuringASend_NothingIsRecordedOrSentAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.merchant(t, "shop")
	arrived, release := make(chan struct{}), make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		close(arrived)
		<-release
		w.WriteHeader(http.StatusOK)
	})
	b.set(t, "shop", rc.URL)
	b.start(t, testConfig())
	webhooktest.Publish(t, b.js, newEvent(shop))
	<-arrived
	_, pending, err := b.endpoints.Remove(context.Background(), "shop")
	require.NoError(t, err)
	require.Equal(t, 1, pending)
	close(release)
	waitFor(t, eventually, "the worker notices", func() bool {
		return strings.Contains(b.log.String(), "webhook attempt not recorded: the endpoint was removed while it was sent")
	})
	require.Zero(t, b.count(t, "SELECT count(*) FROM webhook_deliveries"))
	require.Zero(t, b.count(t, "SELECT count(*) FROM webhook_attempts"))
	require.NotContains(t, b.log.String(), "level=WARN")
	require.Len(t, rc.got(), 1)
}
