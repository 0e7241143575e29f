package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// apiKey is the demo merchant's key, which every development instance has.
const apiKey = "demo-key"

const chargeCard = `mutation Charge($key: String!, $input: ChargeCardInput!) {
	chargeCard(idempotencyKey: $key, input: $input) {
		status replayed retryAfterMs charge { id providerChargeId } failure { code }
	}
}`

const chargeStatus = `query Status($key: String!) {
	chargeStatus(idempotencyKey: $key) { status charge { id providerChargeId } }
}`

// payload is the part of ChargeCardPayload the run reads.
type payload struct {
	Status       string     `json:"status"`
	Replayed     bool       `json:"replayed"`
	RetryAfterMs *int       `json:"retryAfterMs"`
	Charge       *chargeRef `json:"charge"`
}

// chargeRef is the charge of a payload.
type chargeRef struct {
	ID               string `json:"id"`
	ProviderChargeID string `json:"providerChargeId"`
}

func (p *payload) final() bool { return p != nil && (p.Status == "SUCCEEDED" || p.Status == "FAILED") }

func (p *payload) chargeID() string {
	if p.Charge == nil {
		return ""
	}
	return p.Charge.ID
}

// client sends checkouts to the instances in turn, as a load balancer
// would, and moves on to the next instance after a failed try.
type client struct {
	instances []string
	http      *http.Client
	next      atomic.Uint64
}

func newClient(instances []string) *client {
	return &client{instances: instances, http: &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
	}}
}

// pick is the next instance in turn.
func (c *client) pick() string {
	return c.instances[c.next.Add(1)%uint64(len(c.instances))]
}

// do posts one GraphQL operation to the instance at base. It returns the
// field's payload, or the error's code (extensions.code), or a transport
// error.
func (c *client) do(ctx context.Context, base, query string, vars map[string]any) (*payload, string, error) {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return nil, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var out struct {
		Data map[string]*payload `json:"data"`
		// Errors carry the code the client acts on.
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, "", fmt.Errorf("%s: HTTP %d: %w", base, resp.StatusCode, err)
	}
	if len(out.Errors) > 0 {
		code, _ := out.Errors[0].Extensions["code"].(string)
		if code == "" {
			code = out.Errors[0].Message
		}
		return nil, code, nil
	}
	for _, p := range out.Data {
		return p, "", nil
	}
	return nil, "", fmt.Errorf("%s: HTTP %d: no data", base, resp.StatusCode)
}

// retryable are the error codes after which a checkout sends the same
// request again with the same key, as the demo does.
var retryable = map[string]bool{"SERVICE_UNAVAILABLE": true, "RATE_LIMITED": true}

// checkout is one idempotency key: the request, and every final answer any
// client got for it.
type checkout struct {
	key      string
	input    map[string]any
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
	vars := map[string]any{"key": co.key, "input": co.input}
	for base := cmp.Or(first, c.pick()); ctx.Err() == nil; base = c.pick() {
		p, code, err := c.do(ctx, base, chargeCard, vars)
		if p.final() {
			co.mu.Lock()
			co.answers = append(co.answers, answer{status: p.Status, chargeID: p.chargeID(), replayed: p.Replayed})
			if co.final.IsZero() {
				co.final = time.Now()
			}
			co.mu.Unlock()
			return
		}
		co.mu.Lock()
		co.tries++
		if err == nil && p == nil && !retryable[code] {
			co.unknown = append(co.unknown, code)
		}
		co.mu.Unlock()
		wait := 100 * time.Millisecond
		if p != nil && p.RetryAfterMs != nil {
			wait = min(max(time.Duration(*p.RetryAfterMs)*time.Millisecond, wait), 2*time.Second)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// status reads the key's stored state through the API.
func (c *client) status(ctx context.Context, key string) (*payload, error) {
	for {
		p, code, err := c.do(ctx, c.pick(), chargeStatus, map[string]any{"key": key})
		if err == nil && code == "" {
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("chargeStatus %s: %v %s", key, err, code)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// providerCharge is a charge the simulated card provider holds.
type providerCharge struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// providerCharges lists the provider's charges for the demo merchant's key.
func (c *client) providerCharges(ctx context.Context, key string) ([]providerCharge, error) {
	q := url.Values{"merchant": {"demo"}, "client_idempotency_key": {key}}
	var lastErr error
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		base := c.pick()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/provider/v1/charges?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			lastErr = err
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var list struct {
			Data []providerCharge `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			return list.Data, nil
		}
		lastErr = fmt.Errorf("%s: HTTP %d: %v", base, resp.StatusCode, err)
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("the provider's charges of %s: %w", key, lastErr)
}
