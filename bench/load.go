package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"golang.org/x/sync/errgroup"

	"chargeonce/internal/apiclient"
)

// trivialQuery is the cheapest request chargeonce serves, to measure the
// HTTP stack alone.
const trivialQuery = `{"query":"{__typename}"}`

var graphqlHeader = http.Header{
	"Authorization": {"Bearer " + apiclient.DemoAPIKey},
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

// chargeBodyWith is the body of the typed client's ChargeCardBrief for key
// with card: chargeCard asking for the status only, as the bench always
// has, so that its figures stay comparable from run to run.
func chargeBodyWith(key, card string) []byte {
	b, _ := json.Marshal(map[string]any{
		"query":         apiclient.ChargeCardBrief_Operation,
		"operationName": "ChargeCardBrief",
		"variables":     map[string]any{"idempotencyKey": key, "input": chargeInput(card)},
	})
	return b
}

// chargeInput is what every charge of the bench pays: the same card and
// amount for every key, so that a replay always matches its first request.
func chargeInput(card string) apiclient.ChargeCardInput {
	return apiclient.ChargeCardInput{Amount: new(1999), Currency: new("USD"), PaymentMethod: card}
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

// probeTargeter asks the server's probe at path (/healthz: answered by the
// server alone; /readyz: after one empty round trip to the database).
func probeTargeter(url, path string) vegeta.Targeter {
	return func(t *vegeta.Target) error {
		t.Method, t.URL, t.Header = http.MethodGet, url+path, nil
		return nil
	}
}

// probeOK reports whether a probe answered 200.
func probeOK(r *vegeta.Result) bool { return r.Code == http.StatusOK && r.Error == "" }

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
	var t tally
	t.attack(name, tr, conc, d)
	return t.figures(conc)
}

// tally gathers one kind of load over one or more slices of time: its
// latencies and errors, and its successes over the time it ran, which gives
// its throughput whatever ran in between.
type tally struct {
	// ok says whether an answer is a success; nil: graphQLOK.
	ok        func(*vegeta.Result) bool
	m         vegeta.Metrics
	errs      int
	successes float64
	ran       time.Duration
}

// attack adds a closed loop of conc workers for d to the tally.
func (t *tally) attack(name string, tr vegeta.Targeter, conc int, d time.Duration) {
	a := vegeta.NewAttacker(
		vegeta.Workers(uint64(conc)), vegeta.MaxWorkers(uint64(conc)),
		vegeta.Connections(conc), vegeta.MaxConnections(conc),
		vegeta.KeepAlive(true), vegeta.Timeout(30*time.Second),
	)
	// This slice's own metrics give its throughput as vegeta counts it:
	// successes over the time from the first request to the last answer.
	var slice vegeta.Metrics
	ok := t.ok
	if ok == nil {
		ok = graphQLOK
	}
	for r := range a.Attack(tr, vegeta.Rate{}, d, name) {
		if !ok(r) {
			t.errs++
		}
		t.m.Add(r)
		slice.Add(r)
	}
	slice.Close()
	t.successes += slice.Success * float64(slice.Requests)
	t.ran += slice.Duration + slice.Wait
}

func (t *tally) figures(conc int) Figures {
	t.m.Close()
	f := Figures{
		Concurrency: conc,
		Requests:    int(t.m.Requests),
		P50ms:       ms(t.m.Latencies.P50),
		P99ms:       ms(t.m.Latencies.P99),
		Errors:      t.errs,
	}
	if t.ran > 0 {
		f.Throughput = t.successes / t.ran.Seconds()
	}
	return f
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// finishKeys charges n keys once each through srv, so that they can be
// replayed.
func finishKeys(ctx context.Context, srv *server, n int) ([]string, error) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-replay-%d", i+1)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, k := range keys {
		g.Go(func() error {
			res, err := srv.api.ChargeCard(ctx, k, chargeInput(visaCard))
			if err == nil && res.Status != apiclient.Succeeded {
				err = fmt.Errorf("key %s: status %s", k, res.Status)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return keys, nil
}

// storm sends n requests with one key at once, spread over the servers;
// a client that is told PROCESSING asks again until it holds the final
// result, as a real client would. It counts the simulator's charges for the
// key.
func storm(ctx context.Context, servers []*server, n int) (StormResult, error) {
	key := newKey("bench-storm")
	clients := make([]*apiclient.Client, len(servers))
	for i, s := range servers {
		clients[i] = apiclient.New(s.URL, apiclient.DemoAPIKey,
			&http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}})
	}
	t0 := time.Now()
	answers := apiclient.Storm(ctx, clients, n, key, chargeInput(visaCard), 20*time.Millisecond)
	res := StormResult{Key: key, Requests: n, Instances: len(servers), AllFinalMs: ms(time.Since(t0))}
	for _, a := range answers {
		res.ProcessingAnswers += a.Processing
		if a.Err != nil {
			res.Errors++
		}
	}
	charges, err := clients[0].ProviderCharges(ctx, apiclient.DemoMerchant, key)
	if err != nil {
		return res, fmt.Errorf("storm: counting the simulator's charges: %w", err)
	}
	res.ProviderCharges = len(charges)
	return res, nil
}
