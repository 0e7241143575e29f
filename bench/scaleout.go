package main

import (
	"context"
	"fmt"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// scaleOut runs fresh keys, then replays of finished keys, spread
// round-robin over 1, 2 and 3 instances of the server (smoke 1 and 2), one
// more at a time: separate processes of the same binary on the same
// PostgreSQL, each with its own port, metrics listener, broker and data
// directory, as instances behind a load balancer run. The clients are c in
// all, not c per instance, so that each step spreads the same load wider,
// at the concurrency -profile records (32; smoke 8). All of it shares the
// machine, PostgreSQL and the load generator too: the runs say whether one
// more process on the same cores gains anything, which it does only while
// the server, not the database or the cores, sets the pace; not what more
// machines would give.
func (b *bench) scaleOut(ctx context.Context, provider string) error {
	concs := []int{profileConc(b.opts.concs)}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	var keys []string
	var fresh, replay []Run
	for n := 1; n <= b.opts.scaleOut; n++ {
		// The instances of the step before stay up and keep their share: only
		// the new one starts (and fills its result cache) cold.
		s, err := startServer(ctx, b.binary, b.serverEnv(fmt.Sprintf("scaleout-%d", n), provider))
		if err != nil {
			return err
		}
		servers = append(servers, s)
		urls := make([]string, len(servers))
		for i, s := range servers {
			urls[i] = s.URL
		}
		if keys == nil {
			b.logf("scale-out: finishing %d keys to replay", b.opts.replayKeys)
			if keys, err = finishKeys(ctx, s, b.opts.replayKeys); err != nil {
				return fmt.Errorf("scale-out: finishing keys to replay: %w", err)
			}
		}

		f := Run{Name: "scaleout-fresh", Provider: provider, Instances: n,
			What: fmt.Sprintf("as `fresh` (PROVIDER=%s), the requests sent to the instances in turn", provider)}
		b.concRuns(servers, &f, concs, func() vegeta.Targeter { return freshTargeter(visaCard, urls...) })
		r := Run{Name: "scaleout-replay", Provider: provider, Instances: n,
			What: fmt.Sprintf("as `replay` (%d finished keys in turn), the requests sent to the instances in turn; each instance answers a key's first replay from the database, the later ones from its own result cache", len(keys))}
		b.concRuns(servers, &r, concs, func() vegeta.Targeter { return replayTargeter(keys, urls...) })
		fresh, replay = append(fresh, f), append(replay, r)
	}
	b.results.ScaleOut = append(fresh, replay...)
	return nil
}
