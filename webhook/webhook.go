// Package webhook delivers chargeonce's events to merchants: each
// merchant may register one endpoint (Endpoints.Set, `chargeonce webhook
// set`), and every event of that merchant (charge.* and checkout_session.*)
// is POSTed to it, signed with the endpoint's secret (Sign). A durable
// JetStream consumer queues each event as a delivery row before it acks the
// message, so a redelivered message queues nothing twice; a worker sends due
// deliveries concurrently, at most one at a time per endpoint, and retries
// with exponential backoff until MaxAge after the event was queued. Every
// attempt is recorded for operators (`chargeonce webhook deliveries`), and a
// cleaner forgets finished deliveries after Retention. The store (store.go)
// is the only code that touches the sqlc queries.
package webhook

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/loop"
	"chargeonce/metrics"
)

// Defaults of Config, for a zero field.
const (
	TimeoutDefault         = 10 * time.Second
	BackoffBaseDefault     = 10 * time.Second
	BackoffMaxDefault      = time.Hour
	MaxAgeDefault          = 72 * time.Hour
	ConcurrencyDefault     = 16
	PollIntervalDefault    = 5 * time.Second
	AckWaitDefault         = 5 * time.Minute
	RetentionDefault       = 30 * 24 * time.Hour
	CleanupIntervalDefault = time.Minute
)

// Config tunes a Service. Zero values take the defaults above.
type Config struct {
	// Instance names this instance in the history rows of its attempts
	// (webhook.attempted).
	Instance string
	// Production refuses endpoints that are not https://, or whose host is
	// not a public address (address.go): at registration, and again at
	// every attempt (on the address dialled), where a refused endpoint is
	// recorded as a failed attempt and nothing is sent.
	Production bool
	// AllowPrivateNetworks lets production reach private networks (RFC
	// 1918, RFC 4193, 100.64/10): WEBHOOK_ALLOW_PRIVATE_NETWORKS, for
	// receivers inside the operator's own network.
	AllowPrivateNetworks bool
	// LookupHost resolves endpoints' names; nil is the system's resolver.
	LookupHost LookupHost
	// Timeout bounds one attempt's HTTP request, answer included.
	Timeout time.Duration
	// BackoffBase is the delay after the first failed attempt; it doubles
	// with each further one (with ±20% jitter), up to BackoffMax.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxAge is how long after it was queued a delivery is retried; then it
	// is marked failed and logged at WARN.
	MaxAge time.Duration
	// Concurrency is how many sends this instance runs at once. One endpoint
	// holds at most one of them.
	Concurrency int
	// Lease is how long a worker owns a delivery it took; a delivery whose
	// worker died is taken again after it. Default Timeout + 1m; it must be
	// longer than Timeout.
	Lease time.Duration
	// PollInterval is how often the worker looks for due deliveries when
	// nothing wakes it (deliveries queued by other instances, leases that
	// ran out).
	PollInterval time.Duration
	// AckWait is how long JetStream waits for the consumer's ack before it
	// redelivers a message.
	AckWait time.Duration
	// Retention is how long finished (delivered or failed) deliveries and
	// their attempts are kept; CleanupInterval the time between passes.
	Retention       time.Duration
	CleanupInterval time.Duration
	// Metrics records deliveries, attempts and the pending gauge; nil
	// records nowhere.
	Metrics *metrics.Metrics
	// Now is the clock; tests move it.
	Now func() time.Time
	// WorkerPasses and RetentionPasses are told of each pass the worker
	// and the cleaner finish (test signals), with how many deliveries the
	// worker started sending and how many the cleaner forgot as the
	// Result; nil tells nobody.
	WorkerPasses, RetentionPasses *loop.Passes
}

func (c Config) withDefaults() (Config, error) {
	c.Timeout = cmp.Or(c.Timeout, TimeoutDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	c.MaxAge = cmp.Or(c.MaxAge, MaxAgeDefault)
	c.Concurrency = cmp.Or(c.Concurrency, ConcurrencyDefault)
	c.Lease = cmp.Or(c.Lease, c.Timeout+time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.AckWait = cmp.Or(c.AckWait, AckWaitDefault)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.CleanupInterval = cmp.Or(c.CleanupInterval, CleanupIntervalDefault)
	if c.Metrics == nil {
		c.Metrics = metrics.Discard()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Timeout", c.Timeout}, {"BackoffBase", c.BackoffBase}, {"BackoffMax", c.BackoffMax}, {"MaxAge", c.MaxAge},
		{"Lease", c.Lease}, {"PollInterval", c.PollInterval}, {"AckWait", c.AckWait},
		{"Retention", c.Retention}, {"CleanupInterval", c.CleanupInterval},
	} {
		if d.v < 0 {
			return c, fmt.Errorf("webhook: %s must not be negative, got %s", d.name, d.v)
		}
	}
	switch {
	case c.Concurrency < 0:
		return c, fmt.Errorf("webhook: Concurrency must not be negative, got %d", c.Concurrency)
	case c.Lease <= c.Timeout:
		return c, fmt.Errorf("webhook: the lease (%s) must be longer than the request timeout (%s)", c.Lease, c.Timeout)
	case c.BackoffMax < c.BackoffBase:
		return c, fmt.Errorf("webhook: the largest backoff (%s) is shorter than its base (%s)", c.BackoffMax, c.BackoffBase)
	}
	return c, nil
}

// Service consumes charge events from JetStream and delivers them to
// merchants' endpoints. Several instances may run side by side on one
// database and one stream.
type Service struct {
	cfg    Config
	log    *slog.Logger
	js     jetstream.JetStream
	store  *store
	client *http.Client
	// wake tells the worker that deliveries may be due: the consumer queued
	// one, a send ended, or a retry's time came.
	wake chan struct{}
}

// New returns a Service on pool and js. It registers the pending deliveries
// gauge with cfg.Metrics, so build one Service per Metrics.
func New(pool *pgxpool.Pool, js jetstream.JetStream, log *slog.Logger, cfg Config) (*Service, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// The address a request reaches is checked where it is dialled; through
	// a proxy it would be the proxy's, so webhooks never take one.
	transport.Proxy = nil
	transport.DialContext = newReach(cfg).dialContext(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	s := &Service{
		cfg: cfg, log: log.With("component", "webhook"), js: js, store: newStore(pool, cfg.Instance),
		client: &http.Client{
			Transport: transport,
			// A 3xx is an answer like any other non-2xx: a failed attempt.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		wake: make(chan struct{}, 1),
	}
	cfg.Metrics.WatchWebhooksPending(s.store.countPending)
	return s, nil
}

// Run consumes events, sends deliveries and forgets old ones until ctx
// ends. It waits for sends in flight (each bounded by Timeout) before it
// returns, so that their outcome is recorded.
func (s *Service) Run(ctx context.Context) {
	var loops sync.WaitGroup
	loops.Go(func() { s.consumer().Run(ctx, s.js) })
	loops.Go(func() { s.work(ctx) })
	loops.Go(func() { s.clean(ctx) })
	loops.Wait()
}

// notify wakes the worker, without waiting: one pending wake is enough.
func (s *Service) notify() { loop.Signal(s.wake) }
