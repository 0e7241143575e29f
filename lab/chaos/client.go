package chaos

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"chargeonce/internal/apiclient"
)

// client sends checkouts to the instances in turn, as a load balancer
// would, and moves on to the next instance after a failed try.
type client struct {
	instances []*apiclient.Client
	next      atomic.Uint64
}

func newClient(urls []string) *client {
	httpClient := &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
	}
	c := &client{}
	for _, u := range urls {
		c.instances = append(c.instances, apiclient.New(u, apiclient.DemoAPIKey, httpClient))
	}
	return c
}

// pick is the next instance in turn.
func (c *client) pick() *apiclient.Client {
	return c.instances[c.next.Add(1)%uint64(len(c.instances))]
}

// at is the instance at url, or the next in turn when url is "".
func (c *client) at(url string) *apiclient.Client {
	for _, i := range c.instances {
		if i.URL == url {
			return i
		}
	}
	return c.pick()
}

// chargeID is the id of r's charge, "" without one.
func chargeID(r *apiclient.ChargeResult) string {
	if r == nil || r.Charge == nil {
		return ""
	}
	return r.Charge.Id
}

// record is what the clients of one idempotency key were told: every final
// answer, and the tries before them.
type record struct {
	first time.Time // the first request

	mu      sync.Mutex
	answers []answer
	final   time.Time // the first final answer
	tries   int       // tries answered with an error, a dropped connection or PROCESSING
	unknown []string  // error codes no client should see
}

// told is the first final answer, and whether there is one.
func (rec *record) told() (answer, bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.answers) == 0 {
		return answer{}, false
	}
	return rec.answers[0], true
}

// answer is a final answer a client received.
type answer struct {
	status string
	id     string // the charge's, the refund's, the capture's or the void's
	// amount is a capture's (what it took), failure a failed capture's or
	// void's code; both are zero for any other answer.
	amount  int64
	failure string
	// replayed: the stored result of an earlier request.
	replayed bool
}

// describeAnswer is an answer, told or stored now, for a problem's line.
func describeAnswer(a *answer) string {
	switch {
	case a == nil:
		return "unknown"
	case a.failure != "":
		return fmt.Sprintf("%s (%s)", a.status, a.failure)
	case a.amount != 0:
		return fmt.Sprintf("%s %s of %d", a.status, a.id, a.amount)
	}
	return strings.TrimSpace(a.status + " " + a.id)
}

// checkout is one idempotency key of a charge: the request, and what its
// clients were told.
type checkout struct {
	key      string
	input    apiclient.ChargeCardInput
	declined bool
	// manual: it only authorizes (captureMethod MANUAL), for the capture
	// load to capture or void.
	manual bool
	// held: sent to an instance that was killed during its provider call.
	held bool
	// taken: the refund or the capture load has taken it (guarded by
	// run.mu).
	taken bool
	record
}

// send is one try of a key's request at an instance: its answer and true
// when the answer is final; else the hint of a PROCESSING answer (0 when
// none) and the error, if any.
type send func(ctx context.Context, at *apiclient.Client) (answer, bool, time.Duration, error)

// charge is the checkout's send.
func (co *checkout) charge(ctx context.Context, at *apiclient.Client) (answer, bool, time.Duration, error) {
	p, err := at.ChargeCard(ctx, co.key, co.input)
	if !p.Final() {
		return answer{}, false, p.RetryAfter(), err
	}
	return answer{status: p.Status, id: chargeID(p), replayed: p.Replayed}, true, 0, nil
}

// settle sends a key's request until a final answer or ctx's end, and
// records what its client was told in rec: after a network error, a
// retryable error or PROCESSING (after its retryAfterMs), the same request
// with the same key goes to the next instance. The first goes to first, or
// to the next instance when it is "".
func (c *client) settle(ctx context.Context, rec *record, first string, send send) {
	for instance := c.at(first); ctx.Err() == nil; instance = c.pick() {
		a, final, retryAfter, err := send(ctx, instance)
		if final {
			rec.mu.Lock()
			rec.answers = append(rec.answers, a)
			if rec.final.IsZero() {
				rec.final = time.Now()
			}
			rec.mu.Unlock()
			return
		}
		rec.mu.Lock()
		rec.tries++
		// Losing a machine may cost a client only errors after which
		// nothing ran. An unknown outcome is safe to retry (the checkout
		// library does), but it is a fault of the run all the same.
		if code := apiclient.Code(err); code != "" && apiclient.RetryOf(code) != apiclient.RetryNothingRan {
			rec.unknown = append(rec.unknown, code)
		}
		rec.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(min(max(retryAfter, 100*time.Millisecond), 2*time.Second)):
		}
	}
}

// storm sends one key's request from clients clients at once, spread over
// the instances, each until a final answer, and returns when all have one.
func (c *client) storm(ctx context.Context, rec *record, send send, clients int) {
	var sends sync.WaitGroup
	for i := range clients {
		url := c.instances[i%len(c.instances)].URL
		sends.Go(func() { c.settle(ctx, rec, url, send) })
	}
	sends.Wait()
}

// status reads the key's stored state through the API.
func (c *client) status(ctx context.Context, key string) (*apiclient.ChargeResult, error) {
	return ask(ctx, c, "chargeStatus "+key, func(i *apiclient.Client) (*apiclient.ChargeResult, error) {
		return i.ChargeStatus(ctx, key)
	})
}

// providerCharges lists the provider's charges for the demo merchant's
// key.
func (c *client) providerCharges(ctx context.Context, key string) ([]apiclient.ProviderCharge, error) {
	return ask(ctx, c, "the provider's charges of "+key, func(i *apiclient.Client) ([]apiclient.ProviderCharge, error) {
		return i.ProviderCharges(ctx, apiclient.DemoMerchant, key)
	})
}

// ask reads what through any instance that answers, trying each in turn
// for about ten seconds.
func ask[T any](ctx context.Context, c *client, what string, read func(*apiclient.Client) (T, error)) (T, error) {
	var lastErr error
	for attempt := 0; attempt < 100 && ctx.Err() == nil; attempt++ {
		v, err := read(c.pick())
		if err == nil {
			return v, nil
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	var zero T
	return zero, fmt.Errorf("%s: %w", what, cmp.Or(lastErr, ctx.Err()))
}
