package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"chargeonce/db/localpg"
	"chargeonce/events"
	"chargeonce/internal/apiclient"
)

// How the event latencies are measured: under fresh charges at each of
// latencyConcs (a light load, and the many checkouts in flight of
// fresh-300ms) against a provider that answers after inFlightDelay, so
// that a subscriber opened latencyWatchAfter into a charge sees it
// PROCESSING first, by latencyWatchers subscribers at a time.
var latencyConcs = []int{32, 256}

const (
	latencyWatchers   = 16
	latencyWatchAfter = 50 * time.Millisecond
	eventsStream      = "CHARGES"
	succeededSubject  = "chargeonce.charge.succeeded"
)

// EventLatency is how long a charge's success takes to reach the event
// stream and a live-status subscriber, measured from the time the server
// records with it (the event's occurredAt, the charge's createdAt: taken
// just before the statement that commits it) to its arrival, on the same
// machine's clock.
type EventLatency struct {
	Load        string     `json:"load"`
	Concurrency int        `json:"concurrency"`
	Throughput  float64    `json:"throughput_per_s"`
	Errors      int        `json:"errors"`
	Stream      Percentile `json:"stream"`
	Subscriber  Percentile `json:"subscriber"`
}

// Percentile is a latency's p50 and p99 over Count samples.
type Percentile struct {
	Count int     `json:"count"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

// summary is l in one line.
func (l EventLatency) summary() string {
	return fmt.Sprintf("c=%d (%.0f charges/s): to the stream p50 %s ms, p99 %s ms; to a live-status subscriber p50 %s ms, p99 %s ms",
		l.Concurrency, l.Throughput, msText(l.Stream.P50ms), msText(l.Stream.P99ms), msText(l.Subscriber.P50ms), msText(l.Subscriber.P99ms))
}

func percentiles(ms []float64) Percentile {
	return Percentile{Count: len(ms), P50ms: percentile(ms, 0.50), P99ms: percentile(ms, 0.99)}
}

// eventLatencies measures, on a server of its own with a 300 ms provider
// under fresh charges at each of concs in turn: every charge.succeeded read from the
// stream CHARGES (an ordered consumer from the run's start, on the
// server's embedded broker), and latencyWatchers clients that each, in
// turn, start a charge, subscribe to its live status over server-sent
// events while it is PROCESSING, and wait for SUCCEEDED.
func (b *bench) eventLatencies(ctx context.Context, concs []int) error {
	port, err := localpg.FreePort()
	if err != nil {
		return err
	}
	env := b.serverEnv("latency", "instant")
	env["INSTANT_DELAY"] = inFlightDelay.String()
	env["EMBEDDED_NATS_PORT"] = strconv.Itoa(port)
	srv, err := startServer(ctx, b.binary, env)
	if err != nil {
		return err
	}
	defer srv.stop()

	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("event latency: the server's broker: %w", err)
	}
	defer nc.Close()
	for _, c := range concs {
		if err := b.eventLatency(ctx, srv, nc, c); err != nil {
			return err
		}
	}
	return nil
}

// eventLatency is one load of eventLatencies, at conc. The outbox is
// drained first (the runs before may have left events that this server's
// relay would publish now, with latencies that are not this run's), and
// only events that occur from the run's start count.
func (b *bench) eventLatency(ctx context.Context, srv *server, nc *nats.Conn, conc int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops reading the stream
	if err := b.outboxDrained(ctx, time.Minute); err != nil {
		return err
	}
	stream, err := b.streamLatencies(ctx, nc, time.Now())
	if err != nil {
		return err
	}
	runCtx, stop := context.WithTimeout(ctx, b.opts.duration)
	defer stop()
	watched := make(chan []float64, latencyWatchers)
	for range latencyWatchers {
		go func() { watched <- watch(runCtx, srv) }()
	}
	f := attack("event-latency", freshTargeter(visaCard, srv.URL), conc, b.opts.duration)
	var live []float64
	for range latencyWatchers {
		live = append(live, <-watched...)
	}
	// What the stream still brings is of charges made during the run.
	time.Sleep(time.Second)
	res := &EventLatency{
		Load: fmt.Sprintf("fresh charges, PROVIDER=instant with INSTANT_DELAY=%s", inFlightDelay), Concurrency: conc,
		Throughput: f.Throughput, Errors: f.Errors, Stream: percentiles(stream()), Subscriber: percentiles(live),
	}
	b.results.Latency = append(b.results.Latency, *res)
	b.logf("event latency  c=%-3d %8.0f/s  stream p50 %6.2f ms p99 %6.2f ms (%d)  subscriber p50 %6.2f ms p99 %6.2f ms (%d)  errors %d",
		conc, f.Throughput, res.Stream.P50ms, res.Stream.P99ms, res.Stream.Count, res.Subscriber.P50ms, res.Subscriber.P99ms, res.Subscriber.Count, f.Errors)
	if res.Stream.Count == 0 || res.Subscriber.Count == 0 {
		return fmt.Errorf("event latency: %d events read from the stream and %d from subscribers; both must be some", res.Stream.Count, res.Subscriber.Count)
	}
	return nil
}

// streamLatencies starts reading the charge.succeeded events that reach
// the stream from now on, and returns what reads the latency so far of
// each one that occurred at since or later.
func (b *bench) streamLatencies(ctx context.Context, nc *nats.Conn, since time.Time) (func() []float64, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, eventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{succeededSubject}, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("event latency: a consumer of %s: %w", eventsStream, err)
	}
	var mu sync.Mutex
	var lat []float64
	cc, err := cons.Consume(func(m jetstream.Msg) {
		arrived := time.Now()
		var e struct {
			OccurredAt time.Time `json:"occurredAt"`
		}
		if json.Unmarshal(m.Data(), &e) != nil || e.OccurredAt.Before(since) {
			return
		}
		mu.Lock()
		lat = append(lat, ms(arrived.Sub(e.OccurredAt)))
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, cc.Stop)
	return func() []float64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]float64(nil), lat...)
	}, nil
}

// watch charges new keys one after the other until ctx ends, subscribing to
// each while it is PROCESSING, and returns, for each that it saw succeed,
// the time from its charge's createdAt to the SUCCEEDED message.
func watch(ctx context.Context, srv *server) []float64 {
	var lat []float64
	client := &http.Client{}
	for ctx.Err() == nil {
		key := uuid.NewString()
		charged := make(chan struct{})
		go func() {
			defer close(charged)
			_, _ = srv.api.ChargeCard(context.WithoutCancel(ctx), key, chargeInput(visaCard))
		}()
		time.Sleep(latencyWatchAfter)
		if d, ok := subscribeUntilSucceeded(ctx, client, srv.URL, key); ok {
			lat = append(lat, d)
		}
		<-charged
	}
	return lat
}

// subscribeUntilSucceeded subscribes to key's live status over server-sent
// events and reads until SUCCEEDED: the time from the charge's createdAt to
// that message, if it came after a PROCESSING one (a subscription opened
// after the commit measures nothing).
func subscribeUntilSucceeded(ctx context.Context, client *http.Client, serverURL, key string) (float64, bool) {
	body, _ := json.Marshal(map[string]any{"query": apiclient.ChargeUpdated_Operation, "variables": map[string]any{"idempotencyKey": key}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL+"/graphql", bytes.NewReader(body))
	if err != nil {
		return 0, false
	}
	req.Header.Set("Authorization", "Bearer "+apiclient.DemoAPIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	lines := bufio.NewScanner(resp.Body)
	sawProcessing := false
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		arrived := time.Now()
		var m struct {
			Data struct {
				ChargeUpdated struct {
					Status string
					Charge *struct{ CreatedAt time.Time }
				}
			}
		}
		if json.Unmarshal([]byte(data), &m) != nil {
			return 0, false
		}
		switch u := m.Data.ChargeUpdated; u.Status {
		case "PROCESSING":
			sawProcessing = true
		case "SUCCEEDED":
			if !sawProcessing || u.Charge == nil {
				return 0, false
			}
			return ms(arrived.Sub(u.Charge.CreatedAt)), true
		default:
			return 0, false
		}
	}
	return 0, false
}

// outboxDrained waits, up to within, until the outbox holds no unsent
// event.
func (b *bench) outboxDrained(ctx context.Context, within time.Duration) error {
	pool, err := pgxpool.New(ctx, b.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	deadline := time.Now().Add(within)
	for {
		n, err := events.CountUnsent(ctx, pool)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("event latency: %d events still unsent after %s", n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
