package webhook

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"chargeonce/loop"
	"chargeonce/metrics"
	"chargeonce/tracing"
)

// dbTimeout bounds each of the worker's statements.
const dbTimeout = 10 * time.Second

// work sends due deliveries until ctx ends, then waits for the sends in
// flight. It looks for due deliveries whenever something wakes it (a
// delivery queued, a send ended, a retry's time came) and every
// PollInterval, and takes at most as many as it has free senders, never one
// of an endpoint it is sending to already: a slow endpoint holds one sender,
// and every other merchant's deliveries go on.
func (s *Service) work(ctx context.Context) {
	f := &inFlight{endpoints: map[uuid.UUID]struct{}{}}
	var sends sync.WaitGroup
	defer sends.Wait()
	loop.Runner{Name: "webhook worker", Interval: s.cfg.PollInterval, Wake: s.wake, Logger: s.log, Passes: s.cfg.WorkerPasses}.Run(ctx,
		func(ctx context.Context) (loop.Next, error) {
			started, err := s.dispatch(ctx, f, &sends)
			return loop.Next{Result: started}, err
		})
}

// inFlight is the set of endpoints this worker is sending to.
type inFlight struct {
	mu        sync.Mutex
	endpoints map[uuid.UUID]struct{}
}

func (f *inFlight) snapshot() []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.endpoints))
}

func (f *inFlight) add(id uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endpoints[id] = struct{}{}
}

func (f *inFlight) remove(id uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.endpoints, id)
}

// dispatch takes due deliveries for the free senders, starts their sends,
// and says how many it started.
func (s *Service) dispatch(ctx context.Context, f *inFlight, sends *sync.WaitGroup) (int, error) {
	busy := f.snapshot()
	free := s.cfg.Concurrency - len(busy)
	if free <= 0 {
		return 0, nil // a send that ends wakes the worker
	}
	now := s.cfg.Now()
	dbCtx, cancel := context.WithTimeout(ctx, dbTimeout)
	due, err := s.store.takeDue(dbCtx, now, now.Add(s.cfg.Lease), busy, free)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("take due deliveries: %w", err)
	}
	for _, d := range due {
		f.add(d.endpointID)
		sends.Go(func() {
			defer func() {
				f.remove(d.endpointID)
				s.notify() // the endpoint may have more due, and a sender is free
			}()
			// A send that started finishes, within Timeout, even at
			// shutdown, so that its outcome is recorded.
			s.attempt(context.WithoutCancel(ctx), d)
		})
	}
	return len(due), nil
}

// attempt sends d once and records the outcome: delivered on a 2xx;
// otherwise retried after a backoff, or failed once MaxAge has passed since
// it was queued.
// tracer is the webhook worker's: its spans are the attempts.
var tracer = tracing.Tracer("webhook")

func (s *Service) attempt(ctx context.Context, d delivery) {
	log := s.log.With("event_id", d.eventID, "type", d.eventType, "merchant_id", d.merchantID,
		"endpoint_id", d.endpointID, "attempt", d.attempt)
	// The attempt is a span in the event's trace, which its request carries
	// to the merchant's handler (send).
	sendCtx, span := tracer.Start(tracing.ContextFrom(ctx, d.traceparent, d.tracestate), "webhook.attempt",
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("chargeonce.event_type", d.eventType), attribute.String("chargeonce.event_id", d.eventID.String()),
			attribute.String("chargeonce.endpoint_id", d.endpointID.String()), attribute.Int("chargeonce.webhook_attempt", d.attempt)))
	started, clock := s.cfg.Now(), time.Now()
	res := s.send(sendCtx, d, started)
	o := outcome{startedAt: started, duration: time.Since(clock), httpStatus: res.status, errText: res.err, now: s.cfg.Now()}
	span.SetAttributes(attribute.String("chargeonce.webhook_result", res.result), attribute.Int("http.response.status_code", res.status))
	if res.result != resultDelivered {
		span.SetStatus(codes.Error, res.result)
	}
	span.End()
	metrics.ObserveWithTrace(sendCtx, s.cfg.Metrics.WebhookAttemptDuration.WithLabelValues(res.result), o.duration.Seconds())
	deadline := d.queuedAt.Add(s.cfg.MaxAge)
	switch {
	case res.result == resultDelivered:
		o.state = stateDelivered
	case !o.now.Before(deadline):
		o.state = stateFailed
	default:
		o.state = statePending
		// The last retry comes at the deadline, not after it.
		o.next = o.now.Add(backoff(d.attempt, s.cfg.BackoffBase, s.cfg.BackoffMax, rand.Float64()))
		if o.next.After(deadline) {
			o.next = deadline
		}
	}

	dbCtx, cancel := context.WithTimeout(ctx, dbTimeout)
	current, err := s.store.record(dbCtx, d, o)
	cancel()
	if errors.Is(err, errDeliveryGone) {
		log.Info("webhook attempt not recorded: the endpoint was removed while it was sent", "status", res.status, "error", res.err)
		return
	}
	if err != nil {
		log.Warn("webhook attempt could not be recorded; the delivery is taken again when its lease ends",
			"err", err, "status", res.status, "error", res.err)
		return
	}
	if !current {
		log.Warn("webhook attempt recorded after its lease ended: another worker has taken the delivery again",
			"status", res.status, "error", res.err, "duration", o.duration)
		return
	}
	switch o.state {
	case stateDelivered:
		s.cfg.Metrics.WebhookDeliveries.WithLabelValues(stateDelivered).Inc()
		log.Info("webhook delivered", "status", res.status, "duration", o.duration)
	case stateFailed:
		s.cfg.Metrics.WebhookDeliveries.WithLabelValues(stateFailed).Inc()
		log.Warn("webhook delivery failed: no attempt succeeded within the maximum age; given up",
			"status", res.status, "error", res.err, "queued_at", d.queuedAt, "max_age", s.cfg.MaxAge)
	default:
		log.Info("webhook attempt failed; retrying", "status", res.status, "error", res.err,
			"duration", o.duration, "next_attempt_at", o.next)
		time.AfterFunc(o.next.Sub(o.now), s.notify)
	}
}

// backoff is the delay after failed attempt number attempt (1 for the
// first): base doubled for each attempt before it, times a jitter of ±20%
// (r in [0, 1) picks it), and never more than most.
func backoff(attempt int, base, most time.Duration, r float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < most; i++ {
		d *= 2
	}
	return min(time.Duration(float64(d)*(0.8+0.4*r)), most)
}
