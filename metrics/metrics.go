// Package metrics holds chargeonce's Prometheus instruments: what the payment
// flow, the reconciler, the retention cleaner, the HTTP edge and the webhook
// deliveries count and time. It is the one package that knows Prometheus; the others record into
// the fields of a *Metrics. A Metrics built without a registry records into
// instruments nobody scrapes, which is what tests and commands use.
package metrics

import (
	"context"
	"math"
	"time"

	"github.com/IBM/pgxpoolprometheus"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
)

const namespace = "chargeonce"

// Labels of Charges.
const (
	BySucceeded = "succeeded"
	ByFailed    = "failed"

	ByRequest    = "request"    // the request that claimed the key, or a retry that took it over
	ByReconciler = "reconciler" // a reconciler pass
)

// Labels of AuthCache.
const (
	CacheHit    = "hit"    // served from the cache, without the database
	CacheMiss   = "miss"   // looked up in the database; cached if it authenticated
	CacheBypass = "bypass" // looked up in the database: the instance hears no key changes, so it caches nothing
)

// Labels of StoredAnswers.
const (
	AnswerFromMemory   = "memory"   // the instance's own, kept since it gave it
	AnswerFromDatabase = "database" // read from the database in one statement
)

// Metrics are chargeonce's instruments.
type Metrics struct {
	// Charges counts finalized attempts by outcome (succeeded, failed) and
	// by whom (request, reconciler).
	Charges *prometheus.CounterVec
	// Refunds counts finalized refund attempts by outcome (succeeded,
	// failed) and by whom (request, reconciler); RefundsRefused counts
	// refunds refused before anything was claimed, by reason
	// (exceeds_charge, charge_not_found).
	Refunds        *prometheus.CounterVec
	RefundsRefused *prometheus.CounterVec
	// Captures and Voids count finalized capture and void attempts by
	// outcome and by whom; CapturesRefused counts captures and voids
	// refused before anything was claimed, by reason (the error code).
	Captures        *prometheus.CounterVec
	Voids           *prometheus.CounterVec
	CapturesRefused *prometheus.CounterVec
	// Authorizations counts authorizations' ends and warnings, by what
	// happened (expiring: warned of; expired).
	Authorizations *prometheus.CounterVec
	// LateCharges counts charges found at the provider after their attempt
	// failed as provider_unavailable, each refunded.
	LateCharges prometheus.Counter
	// DuplicateCharges counts second successful provider charges found for
	// one attempt, each refunded.
	DuplicateCharges prometheus.Counter
	// OutcomeUnknown counts requests that answered PROCESSING because the
	// provider's outcome was unknown, handing the attempt to the reconciler.
	OutcomeUnknown prometheus.Counter
	// Replays counts stored results returned to a retry (replayed: true).
	Replays prometheus.Counter
	// InFlight counts PROCESSING answers to a request whose key another
	// request is still working on.
	InFlight prometheus.Counter
	// KeyReused counts IDEMPOTENCY_KEY_REUSED refusals.
	KeyReused prometheus.Counter
	// OrderPaid counts ORDER_ALREADY_PAID refusals.
	OrderPaid prometheus.Counter
	// RetryTakeovers counts retries that took over a stuck attempt.
	RetryTakeovers prometheus.Counter

	// CheckoutSessions counts checkout sessions created (not replays).
	CheckoutSessions prometheus.Counter
	// SessionRefused counts new charge attempts a checkout session refused,
	// by reason (paid, expired, locked).
	SessionRefused *prometheus.CounterVec
	// Declines counts declined charges made with a publishable key, the
	// traffic of card testing, and client secrets that named no session
	// (guesses), by what counts them (key, ip).
	Declines *prometheus.CounterVec
	// CardTestingSuspected counts the suspicions of card testing raised: a
	// publishable key's declines ran over their allowance.
	CardTestingSuspected prometheus.Counter

	// AuthenticationStarted counts attempts that began waiting for the
	// shopper to authenticate (3-D Secure); AuthenticationEnded counts how
	// those ended (completed, failed, abandoned), and AuthenticationWait
	// how long the shopper took.
	AuthenticationStarted prometheus.Counter
	AuthenticationEnded   *prometheus.CounterVec
	AuthenticationWait    prometheus.Histogram

	// ProviderDuration times every call to the card provider by operation
	// (create_charge, find_charge, cancel_charge, create_refund, find_refund,
	// capture_charge, find_capture, void_charge, find_void,
	// read_authorization) and result (ok, declined, pending, not_found,
	// requires_action, unknown, key_spent, error; an authorization read says
	// its state).
	ProviderDuration *prometheus.HistogramVec
	// ProviderErrors counts provider calls without a definitive answer.
	ProviderErrors *prometheus.CounterVec
	// ProviderRekeys counts attempts given a new provider key because the
	// provider spent the old one (it replays a failure for it) and held no
	// charge for the attempt.
	ProviderRekeys prometheus.Counter

	// Reconciler: stuck attempts taken over, charges sent again under the
	// same provider key, and attempts given up as provider_unavailable.
	ReconcilerTakeovers prometheus.Counter
	ReconcilerRedrives  prometheus.Counter
	ReconcilerGiveUps   prometheus.Counter

	// RetentionDeleted counts expired attempts the cleaner forgot.
	RetentionDeleted prometheus.Counter

	// RateLimited counts requests refused with RATE_LIMITED, by scope
	// (merchant, ip, publishable, publishable_ip, declines_ip; for streams:
	// stream_address, stream_merchant, and subscriptions, a websocket's).
	RateLimited *prometheus.CounterVec
	// Unauthenticated counts requests with a missing, malformed, unknown or
	// revoked API key.
	Unauthenticated prometheus.Counter
	// AuthCache counts API key lookups by how the cache of authentications
	// answered (hit, miss, bypass).
	AuthCache *prometheus.CounterVec
	// ResultCache counts lookups in the cache of finished results, one per
	// charge and status query, by whether memory answered (hit) or the
	// database had to (miss, a fresh key included).
	ResultCache *prometheus.CounterVec
	// StoredAnswers counts replays answered with the stored answer given to
	// the same request before, without running it, by where it was kept
	// (AnswerFromMemory, AnswerFromDatabase).
	StoredAnswers *prometheus.CounterVec
	// StoredAnswerMisses counts reads of the database for a stored answer
	// that found none: what a storm of replays cost the requests that ran.
	StoredAnswerMisses prometheus.Counter
	// HTTPDuration times /graphql requests by operation (the root field) and
	// HTTP status code.
	HTTPDuration *prometheus.HistogramVec
	// Subscriptions is how many live status subscriptions (chargeUpdated)
	// are open on this instance.
	Subscriptions prometheus.Gauge
	// StripeWebhookRefused counts requests to Stripe's webhook endpoint
	// refused before any event was read, by reason (stripe.WebhookRefusal:
	// rate_limited, too_large, no_signature, signature_mismatch, …).
	StripeWebhookRefused *prometheus.CounterVec
	// LiveReads counts the reads of attempts the live status made: one per
	// attempt followed at each wake or poll, however many watch it.
	LiveReads prometheus.Counter
	// Streams is how many websockets and event streams are open on this
	// instance; StreamsEnded counts those the server ended, by reason
	// (lifetime, revoked: its key no longer authenticates or its origin is
	// no longer registered, shutdown).
	Streams      prometheus.Gauge
	StreamsEnded *prometheus.CounterVec

	// EventsPublished counts outbox events the broker acknowledged, by
	// whether the stream already had them (duplicate: true after a relay
	// published an event again).
	EventsPublished *prometheus.CounterVec
	// WebhookDeliveries counts webhook deliveries that ended, by outcome
	// (delivered, failed: given up after the maximum age).
	WebhookDeliveries *prometheus.CounterVec
	// WebhookAttemptDuration times attempts to send a webhook, by result
	// (delivered, http_error, network_error, refused).
	WebhookAttemptDuration *prometheus.HistogramVec

	reg prometheus.Registerer
}

// New returns chargeonce's instruments, registered with reg when it is not
// nil, together with the Go runtime's and the process's collectors.
func New(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	}
	m := &Metrics{
		Charges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "charges_total",
			Help: "Charge attempts finalized, by outcome (succeeded, failed) and by whom (request, reconciler)."},
			[]string{"outcome", "by"}),
		Refunds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "refunds_total",
			Help: "Refund attempts finalized, by outcome (succeeded, failed; reversed: a refund that succeeded failed later) and by whom (request, reconciler)."},
			[]string{"outcome", "by"}),
		RefundsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "refunds_refused_total",
			Help: "Refunds refused before anything was claimed, by reason (exceeds_charge, charge_not_found)."},
			[]string{"reason"}),
		Captures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "captures_total",
			Help: "Capture attempts finalized, by outcome (succeeded, failed) and by whom (request, reconciler)."},
			[]string{"outcome", "by"}),
		Voids: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "voids_total",
			Help: "Void attempts finalized, by outcome (succeeded, failed) and by whom (request, reconciler)."},
			[]string{"outcome", "by"}),
		CapturesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "captures_refused_total",
			Help: "Captures and voids refused before anything was claimed, by reason (the error code)."},
			[]string{"reason"}),
		Authorizations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "authorizations_total",
			Help: "Authorizations warned of before they lapse (expiring) and lapsed (expired)."},
			[]string{"event"}),
		LateCharges: counter("late_charges_refunded_total",
			"Charges found at the provider after their attempt failed as provider_unavailable, each refunded whole."),
		DuplicateCharges: counter("duplicate_charges_refunded_total",
			"Second successful provider charges found for one attempt, each refunded whole."),
		OutcomeUnknown: counter("charge_outcome_unknown_total",
			"Requests answered PROCESSING because the provider's outcome was unknown; the reconciler settles them."),
		Replays:  counter("charge_replays_total", "Stored results returned to a retry (replayed: true)."),
		InFlight: counter("charge_in_flight_total", "PROCESSING answers to a request whose key another request is working on."),
		KeyReused: counter("charge_idempotency_key_reused_total",
			"Requests refused with IDEMPOTENCY_KEY_REUSED: the same key with a different request."),
		OrderPaid: counter("charge_order_already_paid_total", "Requests refused with ORDER_ALREADY_PAID."),
		RetryTakeovers: counter("charge_retry_takeovers_total",
			"Retries that took over a stuck attempt (its holder died, released its lease with the outcome unknown, or lost its claim's reply)."),
		CheckoutSessions: counter("checkout_sessions_created_total", "Checkout sessions created (replays not counted)."),
		SessionRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "checkout_session_refused_total",
			Help: "New charge attempts refused by their checkout session, by reason (paid, expired, locked)."},
			[]string{"reason"}),
		Declines: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "publishable_declines_total",
			Help: "Declined charges made with a publishable key, and client secrets that named no session, counted against the key and against the client address (scope: key, ip)."},
			[]string{"scope"}),
		CardTestingSuspected: counter("card_testing_suspected_total",
			"Suspicions of card testing raised: a publishable key's declines ran over RATE_LIMIT_DECLINES_KEY (one per key and suspicion window, on each instance)."),
		AuthenticationStarted: counter("authentication_started_total",
			"Charge attempts that began waiting for the shopper to authenticate (3-D Secure)."),
		AuthenticationEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "authentication_ended_total",
			Help: "Authentications that ended, by outcome (completed, failed, abandoned: cancelled after the authentication window)."},
			[]string{"outcome"}),
		AuthenticationWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace,
			Name: "authentication_wait_seconds", Help: "How long attempts waited for the shopper to authenticate, from the challenge to the outcome.",
			Buckets: []float64{5, 10, 20, 30, 60, 120, 300, 600, 900, 1800}}),
		ProviderDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name: "provider_request_duration_seconds", Help: "Calls to the card provider, by operation and result.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}},
			[]string{"operation", "result"}),
		ProviderErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "provider_errors_total",
			Help: "Calls to the card provider without a definitive answer (timeouts, lost connections, 5xx), by operation."},
			[]string{"operation"}),
		ProviderRekeys: counter("provider_rekeys_total",
			"Attempts given a new provider key: the provider replayed a failure for the old one and held no charge for the attempt."),
		ReconcilerTakeovers: counter("reconciler_takeovers_total", "Stuck attempts (PROCESSING, their lease ended) the reconciler took over."),
		ReconcilerRedrives:  counter("reconciler_redrives_total", "Charges the reconciler sent again under the same provider key."),
		ReconcilerGiveUps: counter("reconciler_give_ups_total",
			"Attempts failed as provider_unavailable after the redrive window."),
		RetentionDeleted: counter("retention_deleted_total", "Expired idempotency keys (finished attempts) forgotten."),
		RateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "rate_limited_total",
			Help: "Requests refused with RATE_LIMITED, by scope (merchant, ip, publishable, publishable_ip, declines_ip; stream_address, stream_merchant: streams open at once; subscriptions: on one websocket)."}, []string{"scope"}),
		Unauthenticated: counter("unauthenticated_requests_total",
			"Requests with a missing, malformed, unknown or revoked API key."),
		AuthCache: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "auth_cache_total",
			Help: "API key lookups, by how this instance's cache of authentications answered (hit, miss, bypass: not listening for key changes)."},
			[]string{"result"}),
		ResultCache: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "result_cache_total",
			Help: "Lookups of an idempotency key in this instance's cache of finished results, one per charge and status query: answered from memory (hit), or left to the database (miss; a fresh key is a miss too)."},
			[]string{"result"}),
		StoredAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "stored_answers_total",
			Help: "Replays of a settled charge answered with the answer given to the same request before (the same key, body and Idempotency-Key header), without running it, by where it was kept: this instance's memory, or the database (an answer another instance, or this one before a restart, gave); counted in charge_replays_total too, and in result_cache_total as a hit from memory, a miss from the database."},
			[]string{"from"}),
		StoredAnswerMisses: counter("stored_answer_misses_total",
			"Reads of the database for a request's stored answer, during a storm of replays, that found none: the request ran after a round trip for nothing."),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name: "http_request_duration_seconds", Help: "/graphql requests, by operation (root field) and HTTP status code.",
			Buckets: prometheus.DefBuckets}, []string{"operation", "code"}),
		EventsPublished: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "events_published_total",
			Help: "Outbox events the broker acknowledged, by whether its stream already had them (duplicate)."},
			[]string{"duplicate"}),
		WebhookDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "webhook_deliveries_total",
			Help: "Webhook deliveries that ended, by outcome (delivered, failed: given up after the maximum age)."},
			[]string{"outcome"}),
		WebhookAttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name:    "webhook_attempt_duration_seconds",
			Help:    "Attempts to send a webhook, by result (delivered, http_error, network_error, refused).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"result"}),
		Subscriptions: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "subscriptions_open",
			Help: "Live status subscriptions (chargeUpdated, over websocket or server-sent events) open on this instance."}),
		StripeWebhookRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "stripe_webhook_refused_total",
			Help: "Requests to the Stripe webhook endpoint refused before any event was read, by reason (rate_limited, too_large, unreadable, no_signature, unreadable_signature, signature_too_old, signature_mismatch, not_an_event)."},
			[]string{"reason"}),
		LiveReads: counter("live_status_reads_total",
			"Reads of charge attempts by the live status: one per followed attempt at each notification or poll, however many subscriptions watch it."),
		Streams: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "streams_open",
			Help: "Websockets and event streams open on /graphql on this instance."}),
		StreamsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "streams_ended_total",
			Help: "Websockets and event streams the server ended, by reason (lifetime, revoked: key or origin, shutdown)."},
			[]string{"reason"}),
		reg: reg,
	}
	if reg != nil {
		reg.MustRegister(m.Charges, m.Refunds, m.RefundsRefused, m.Captures, m.Voids, m.CapturesRefused, m.Authorizations, m.LateCharges, m.DuplicateCharges, m.OutcomeUnknown, m.Replays, m.InFlight, m.KeyReused, m.OrderPaid, m.RetryTakeovers,
			m.CheckoutSessions, m.SessionRefused, m.Declines, m.CardTestingSuspected,
			m.AuthenticationStarted, m.AuthenticationEnded, m.AuthenticationWait,
			m.ProviderDuration, m.ProviderErrors, m.ProviderRekeys, m.ReconcilerTakeovers, m.ReconcilerRedrives, m.ReconcilerGiveUps,
			m.RetentionDeleted, m.RateLimited, m.Unauthenticated, m.AuthCache, m.ResultCache, m.StoredAnswers, m.StoredAnswerMisses, m.HTTPDuration, m.EventsPublished,
			m.WebhookDeliveries, m.WebhookAttemptDuration, m.Subscriptions, m.StripeWebhookRefused, m.LiveReads, m.Streams, m.StreamsEnded,
			collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Discard returns instruments that are not registered anywhere.
func Discard() *Metrics { return New(nil) }

// WatchPool exports the connection pool's statistics (pgxpool_*).
func (m *Metrics) WatchPool(pool *pgxpool.Pool) {
	if m.reg != nil {
		m.reg.MustRegister(pgxpoolprometheus.NewCollector(pool, map[string]string{"db": "chargeonce"}))
	}
}

// WatchStuck exports the number of stuck attempts (PROCESSING, their lease
// ended), read by count at each scrape.
func (m *Metrics) WatchStuck(count Count) {
	m.watch("stuck_processing_attempts",
		"Stuck attempts: PROCESSING, their lease ended (their holder is gone, or released it), not taken over yet.", count)
}

// WatchWaiting exports the number of attempts waiting for the shopper to
// authenticate, read by count at each scrape.
func (m *Metrics) WatchWaiting(count Count) {
	m.watch("authentication_waiting_attempts",
		"Charge attempts waiting for the shopper to authenticate (3-D Secure): PROCESSING with a next action.", count)
}

// WatchOutbox exports the number of outbox events the broker has not
// acknowledged yet, read by count at each scrape.
func (m *Metrics) WatchOutbox(count Count) {
	m.watch("outbox_unsent_events", "Outbox events not yet acknowledged by the event broker.", count)
}

// WatchWebhooksPending exports the number of webhook deliveries not yet
// delivered nor given up, read by count at each scrape.
func (m *Metrics) WatchWebhooksPending(count Count) {
	m.watch("webhook_pending_deliveries", "Webhook deliveries waiting for their first attempt or a retry.", count)
}

// Count reads a gauge's value from the database at a scrape.
type Count func(context.Context) (int, error)

// countTimeout bounds a Count, so that a slow database cannot hold a scrape.
const countTimeout = 2 * time.Second

// watch exports a gauge read by count at each scrape, within countTimeout;
// a failed count reads as NaN.
func (m *Metrics) watch(name, help string, count Count) {
	if m.reg == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), countTimeout)
			defer cancel()
			n, err := count(ctx)
			if err != nil {
				return math.NaN()
			}
			return float64(n)
		}))
}

// ObserveWithTrace observes v on o, with the trace ctx is in as the
// observation's exemplar (trace_id) when that trace is sampled, so that a
// slow bucket leads to one slow payment's trace.
func ObserveWithTrace(ctx context.Context, o prometheus.Observer, v float64) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	o.Observe(v)
}
