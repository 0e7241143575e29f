package chaos

import (
	"context"
	"fmt"
	"net/http"
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

// retryable are the error codes after which a checkout sends the same
// request again with the same key, as the demo does.
var retryable = map[string]bool{"SERVICE_UNAVAILABLE": true, "RATE_LIMITED": true}

// checkout is one idempotency key: the request, and every final answer any
// client got for it.
type checkout struct {
	key      string
	input    apiclient.ChargeCardInput
	declined bool
	// held: sent to an instance that was killed during its provider call.
	held  bool
	first time.Time

	mu      sync.Mutex
	answers []answer
	final   time.Time // the first final answer
	tries   int       // tries answered with an error, a dropped connection or PROCESSING
	unknown []string  // error codes no client should see
}

// answer is a final answer a client received.
type answer struct {
	status, chargeID string
	replayed         bool
}

// settle sends the checkout's request until a final answer or ctx's end:
// after a network error, a retryable error or PROCESSING (after its
// retryAfterMs), the same request with the same key goes to the next
// instance. The first goes to first, or to the next instance when it is "".
func (c *client) settle(ctx context.Context, co *checkout, first string) {
	for instance := c.at(first); ctx.Err() == nil; instance = c.pick() {
		p, err := instance.ChargeCard(ctx, co.key, co.input)
		if p.Final() {
			co.mu.Lock()
			co.answers = append(co.answers, answer{status: p.Status, chargeID: chargeID(p), replayed: p.Replayed})
			if co.final.IsZero() {
				co.final = time.Now()
			}
			co.mu.Unlock()
			return
		}
		co.mu.Lock()
		co.tries++
		if code := apiclient.Code(err); code != "" && !retryable[code] {
			co.unknown = append(co.unknown, code)
		}
		co.mu.Unlock()
		wait := 100 * time.Millisecond
		if p != nil {
			wait = min(max(p.RetryAfter(), wait), 2*time.Second)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// status reads the key's stored state through the API.
func (c *client) status(ctx context.Context, key string) (*apiclient.ChargeResult, error) {
	for {
		p, err := c.pick().ChargeStatus(ctx, key)
		if err == nil {
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("chargeStatus %s: %w", key, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// providerCharges lists the provider's charges for the demo merchant's
// key, through any instance that answers.
func (c *client) providerCharges(ctx context.Context, key string) ([]apiclient.ProviderCharge, error) {
	var lastErr error
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		charges, err := c.pick().ProviderCharges(ctx, apiclient.DemoMerchant, key)
		if err == nil {
			return charges, nil
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("the provider's charges of %s: %w", key, lastErr)
}
