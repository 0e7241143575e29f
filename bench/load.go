package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

const (
	demoKey        = "demo-key"
	chargeMutation = `mutation($key:String!,$input:ChargeCardInput!){chargeCard(idempotencyKey:$key,input:$input){status replayed}}`
	trivialQuery   = `{"query":"{__typename}"}`
)

var graphqlHeader = http.Header{
	"Authorization": {"Bearer " + demoKey},
	"Content-Type":  {"application/json"},
}

// The simulator's cards: visaCard succeeds at once, slowCard after
// SIM_SLOW_DELAY (cardsim/tokens.go).
const (
	visaCard = "pm_card_visa"
	slowCard = "pm_card_slow"
)

// chargeBody is a chargeCard request for key, the same card and amount for
// every key so that a replay always matches its first request.
func chargeBody(key string) []byte {
	return chargeBodyWith(key, visaCard)
}

func chargeBodyWith(key, card string) []byte {
	b, _ := json.Marshal(map[string]any{
		"query": chargeMutation,
		"variables": map[string]any{
			"key":   key,
			"input": map[string]any{"amount": 1999, "currency": "USD", "paymentMethod": card},
		},
	})
	return b
}

func newKey(prefix string) string {
	return prefix + "-" + rand.Text()
}

// freshTargeter mints a new idempotency key for every request, a random
// UUID as a checkout mints one (crypto.randomUUID), paying with card, and
// sends the requests to the servers at urls in turn.
func freshTargeter(card string, urls ...string) vegeta.Targeter {
	next := roundRobin(urls)
	return func(t *vegeta.Target) error {
		t.Method, t.URL, t.Header = http.MethodPost, next(), graphqlHeader
		t.Body = chargeBodyWith(uuid.NewString(), card)
		return nil
	}
}

// replayTargeter cycles through keys whose charges have finished, and
// through the servers at urls.
func replayTargeter(keys []string, urls ...string) vegeta.Targeter {
	bodies := make([][]byte, len(keys))
	for i, k := range keys {
		bodies[i] = chargeBody(k)
	}
	next := roundRobin(urls)
	var n atomic.Uint64
	return func(t *vegeta.Target) error {
		t.Method, t.URL, t.Header = http.MethodPost, next(), graphqlHeader
		t.Body = bodies[(n.Add(1)-1)%uint64(len(bodies))]
		return nil
	}
}

// roundRobin returns the GraphQL endpoints of the servers at urls one after
// the other, as a load balancer would spread requests over instances: with
// the closed loop's workers sharing it, each instance gets an even share
// whatever its latency.
func roundRobin(urls []string) func() string {
	endpoints := make([]string, len(urls))
	for i, u := range urls {
		endpoints[i] = u + "/graphql"
	}
	var n atomic.Uint64
	return func() string { return endpoints[(n.Add(1)-1)%uint64(len(endpoints))] }
}

func trivialTargeter(url string) vegeta.Targeter {
	return func(t *vegeta.Target) error {
		t.Method, t.URL, t.Header = http.MethodPost, url+"/graphql", graphqlHeader
		t.Body = []byte(trivialQuery)
		return nil
	}
}

// graphQLOK reports whether a response is a 200 without GraphQL errors, and,
// for a charge, a final status.
func graphQLOK(r *vegeta.Result) bool {
	if r.Code != http.StatusOK || r.Error != "" {
		return false
	}
	var resp struct {
		Errors []json.RawMessage `json:"errors"`
		Data   struct {
			ChargeCard *struct{ Status string } `json:"chargeCard"`
		} `json:"data"`
	}
	if json.Unmarshal(r.Body, &resp) != nil || len(resp.Errors) > 0 {
		return false
	}
	return resp.Data.ChargeCard == nil || resp.Data.ChargeCard.Status == "SUCCEEDED"
}

// attack runs a closed loop: conc workers, each sending its next request
// when the previous one is answered, for d.
func attack(name string, tr vegeta.Targeter, conc int, d time.Duration) Figures {
	a := vegeta.NewAttacker(
		vegeta.Workers(uint64(conc)), vegeta.MaxWorkers(uint64(conc)),
		vegeta.Connections(conc), vegeta.MaxConnections(conc),
		vegeta.KeepAlive(true), vegeta.Timeout(30*time.Second),
	)
	var m vegeta.Metrics
	errs := 0
	for r := range a.Attack(tr, vegeta.Rate{}, d, name) {
		if !graphQLOK(r) {
			errs++
		}
		m.Add(r)
	}
	m.Close()
	return Figures{
		Concurrency: conc,
		Requests:    int(m.Requests),
		Throughput:  m.Throughput,
		P50ms:       ms(m.Latencies.P50),
		P99ms:       ms(m.Latencies.P99),
		Errors:      errs,
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// finishKeys charges n keys once each, so that they can be replayed.
func finishKeys(ctx context.Context, url string, n int) ([]string, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-replay-%d", i+1)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	next := make(chan string)
	for range 8 {
		wg.Go(func() {
			for k := range next {
				st, err := charge(ctx, client, url, k)
				if err == nil && st != "SUCCEEDED" {
					err = fmt.Errorf("key %s: status %s", k, st)
				}
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		})
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errc:
		return nil, err
	default:
		return keys, nil
	}
}

// charge sends one chargeCard and returns its status.
func charge(ctx context.Context, client *http.Client, url, key string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", bytes.NewReader(chargeBody(key)))
	if err != nil {
		return "", err
	}
	req.Header = graphqlHeader.Clone()
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Errors []struct{ Message string } `json:"errors"`
		Data   struct {
			ChargeCard *struct{ Status string } `json:"chargeCard"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	if len(out.Errors) > 0 || out.Data.ChargeCard == nil {
		return "", fmt.Errorf("HTTP %d: %+v", resp.StatusCode, out.Errors)
	}
	return out.Data.ChargeCard.Status, nil
}

// storm sends n requests with one key at once, spread over the servers;
// a client that is told PROCESSING asks again until it holds the final
// result, as a real client would.
func storm(ctx context.Context, urls []string, n int) StormResult {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}}
	key := newKey("bench-storm")
	var errs, processing atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			for {
				st, err := charge(ctx, client, urls[i%len(urls)], key)
				if err != nil {
					errs.Add(1)
					return
				}
				if st != "PROCESSING" {
					return
				}
				processing.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return StormResult{
		Key: key, Requests: n, Instances: len(urls),
		Errors: int(errs.Load()), ProcessingAnswers: int(processing.Load()),
		AllFinalMs: ms(time.Since(t0)), ProviderCharges: -1,
	}
}

// providerCharges counts the simulator's charges for a client key: the
// ground truth of how often money moved.
func providerCharges(url, key string) (int, error) {
	resp, err := http.Get(url + "/provider/v1/charges?merchant=demo&client_idempotency_key=" + key)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return 0, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	return len(list.Data), nil
}
