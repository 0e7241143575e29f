package main

import (
	"context"
	"fmt"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// slowProviderDelay is how long the provider takes in the fresh-50ms run;
// inFlightDelay in the fresh-300ms run.
const (
	slowProviderDelay = 50 * time.Millisecond
	inFlightDelay     = 300 * time.Millisecond
)

// slowProvider runs fresh keys against a provider that answers after
// slowProviderDelay: the simulator's slow card. While the server waits for
// the provider it should hold nothing that other charges need, so
// throughput should grow with concurrency (computeRatios says how close to
// linear it comes).
func (b *bench) slowProvider(ctx context.Context) error {
	env := b.serverEnv("slow", "cardsim")
	env["SIM_SLOW_DELAY"] = slowProviderDelay.String()
	srv, err := startServer(ctx, b.binary, env)
	if err != nil {
		return err
	}
	defer srv.stop()
	run := Run{Name: "fresh-50ms", Provider: "cardsim", What: fmt.Sprintf(
		"chargeCard with a new key per request, paying with %s against PROVIDER=cardsim with SIM_SLOW_DELAY=%s: a provider that answers after %s",
		slowCard, slowProviderDelay, slowProviderDelay)}
	b.serverRuns(srv, &run, func() vegeta.Targeter { return freshTargeter(slowCard, srv.URL) })
	b.results.Runs = append(b.results.Runs, run)
	return nil
}

// manyInFlight runs fresh keys at hundreds of clients against the instant
// provider answering after inFlightDelay: many checkouts waiting for the
// provider at once. A charge that waits holds no database connection and
// nothing another charge needs, so throughput should reach c / the delay
// until the fresh-key ceiling bounds it (computeRatios).
func (b *bench) manyInFlight(ctx context.Context) error {
	env := b.serverEnv("in-flight", "instant")
	env["INSTANT_DELAY"] = inFlightDelay.String()
	srv, err := startServer(ctx, b.binary, env)
	if err != nil {
		return err
	}
	defer srv.stop()
	run := Run{Name: "fresh-300ms", Provider: "instant", What: fmt.Sprintf(
		"chargeCard with a new key per request against PROVIDER=instant with INSTANT_DELAY=%s: many checkouts in flight with a provider that answers after %s",
		inFlightDelay, inFlightDelay)}
	b.concRuns([]*server{srv}, &run, b.opts.inFlightConcs, func() vegeta.Targeter { return freshTargeter(visaCard, srv.URL) })
	b.results.Runs = append(b.results.Runs, run)
	return nil
}
