package webhook

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/events"
	"chargeonce/internal/testlog"
	"chargeonce/merchant"
	"chargeonce/payment"
	"chargeonce/webhook/webhooktest"
)

type bundle struct {
	pool      *pgxpool.Pool
	js        jetstream.JetStream
	endpoints *Endpoints
	log       *syncBuffer // what the services logged
}

// setup gives a fresh database (chargeonce's schema alone, as in
// production) and an embedded NATS server with the CHARGES stream.
func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{pool: dbtest.NewPool(t), js: webhooktest.JetStream(t), log: &syncBuffer{}}
	b.endpoints = NewEndpoints(b.pool, Config{})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service log:\n%s", b.log.String())
		}
	})
	return b
}

// testConfig is a configuration for tests: fast retries and polls.
func testConfig() Config {
	return Config{BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond}
}

// newService builds a Service on the bundle's database and stream.
func (b *bundle) newService(t *testing.T, cfg Config) *Service {
	t.Helper()
	s, err := New(b.pool, b.js, slog.New(slog.NewTextHandler(b.log, &slog.HandlerOptions{Level: slog.LevelDebug})), cfg)
	require.NoError(t, err)
	return s
}

// start runs a Service until the test ends.
func (b *bundle) start(t *testing.T, cfg Config) *Service {
	t.Helper()
	s := b.newService(t, cfg)
	b.run(t, s)
	return s
}

// run runs s until the test ends, or until the returned stop is called.
func (b *bundle) run(t *testing.T, s *Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return stop
}

// merchant creates a merchant and returns its id.
func (b *bundle) merchant(t *testing.T, name string) uuid.UUID {
	t.Helper()
	m, _, err := merchant.New(b.pool, false).CreateAPIKey(context.Background(), name, merchant.KeySecret)
	require.NoError(t, err)
	return m.ID
}

// set registers url as merchant's endpoint and returns its secret.
func (b *bundle) set(t *testing.T, merchant, url string) string {
	t.Helper()
	_, secret, err := b.endpoints.Set(context.Background(), merchant, url)
	require.NoError(t, err)
	return secret
}

// deliveries is merchant's delivery log, newest first.
func (b *bundle) deliveries(t *testing.T, merchant string) []LogEntry {
	t.Helper()
	_, log, err := b.endpoints.Deliveries(context.Background(), merchant, 1000)
	require.NoError(t, err)
	return log
}

// count runs a SELECT count(*) … query.
func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// newEvent is a charge.succeeded event of merchant.
func newEvent(merchant uuid.UUID) payment.Event {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return payment.Event{
		ID: uuid.New(), Type: payment.EventChargeSucceeded, OccurredAt: now, MerchantID: merchant,
		IdempotencyKey: uuid.NewString(), AttemptID: new(uuid.New()), Amount: 1999, Currency: "USD",
		Charge: &payment.EventCharge{ID: uuid.New(), ProviderChargeID: "ch_test", CreatedAt: now},
	}
}

// request is what a receiver got.
type request struct {
	at     time.Time
	method string
	url    string // path and query
	header http.Header
	body   []byte
}

func (r request) eventID(t *testing.T) string {
	var e struct{ ID string }
	require.NoError(t, json.Unmarshal(r.body, &e))
	return e.ID
}

// receiver is a loopback HTTP endpoint that records every request and
// answers with what its respond function says.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
}

func newReceiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, body []byte)) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.requests = append(rc.requests, request{at: time.Now(), method: r.Method, url: r.URL.RequestURI(), header: r.Header.Clone(), body: body})
		rc.mu.Unlock()
		respond(w, r, body)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// ok answers 204.
func ok(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusNoContent) }

func (rc *receiver) got() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.requests...)
}

// allAcked reports whether the webhooks consumer has acked every message of
// the stream.
func (b *bundle) allAcked(t *testing.T) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := b.js.Stream(ctx, events.Stream)
	require.NoError(t, err)
	si, err := st.Info(ctx)
	require.NoError(t, err)
	c, err := b.js.Consumer(ctx, events.Stream, Consumer)
	if err != nil {
		return false // not created yet
	}
	ci, err := c.Info(ctx)
	require.NoError(t, err)
	return ci.AckFloor.Stream == si.State.LastSeq && ci.NumAckPending == 0
}

// waitFor waits until cond holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually is the deadline of a wait for something that takes a moment
// on a quiet machine: generous, for a busy one.
const eventually = 60 * time.Second

// syncBuffer is the log sink the tests read while servers write it.
type syncBuffer = testlog.Buffer
