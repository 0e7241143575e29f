package main

import (
	"fmt"
	"slices"
)

// Ratio is one of the comparisons at one concurrency, or one of its
// absolute targets (the storm's charges and errors, the peak RSS), with
// whether it meets its target.
type Ratio struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency,omitempty"` // 0: not per concurrency
	Value       float64 `json:"value"`
	Target      string  `json:"target"`
	// Met says whether Value meets Target; absent where no target applies
	// (not at this concurrency, or no numeric target at all).
	Met *bool `json:"met,omitempty"`
	// decimals is how many the tables show: 2 for a ratio, 0 for a count.
	decimals int
}

// target is a bound on a value, where it applies.
type target struct {
	text  string  // as the tables show it
	op    string  // ">=", "<=", "<" or "=="; empty: no numeric target
	bound float64 // what op compares with
	at    []int   // the concurrencies it applies to; nil: every one
}

// check says whether v at concurrency conc meets t; nil where t does not
// apply.
func (t target) check(conc int, v float64) *bool {
	if t.op == "" || (t.at != nil && !slices.Contains(t.at, conc)) {
		return nil
	}
	var ok bool
	switch t.op {
	case ">=":
		ok = v >= t.bound
	case "<=":
		ok = v <= t.bound
	case "<":
		ok = v < t.bound
	case "==":
		ok = v == t.bound
	default:
		panic("bench: unknown target operator " + t.op)
	}
	return &ok
}

// Targets the tables and docs/performance.md show; the issue sets them.
var (
	peakRSSTarget      = target{text: "< 150 MB", op: "<", bound: 150}
	freshWALTarget     = target{"≤ 2048 B at c=8, 32", "<=", 2048, []int{8, 32}}
	stormChargesTarget = target{text: "= 1", op: "==", bound: 1}
	stormErrorsTarget  = target{text: "= 0", op: "==", bound: 0}
	scalingTarget      = target{text: "scales with concurrency (1.0 = linear); no numeric target"}
	// Many checkouts in flight (fresh-300ms).
	inFlightThroughputTarget = target{text: "≥ 0.90", op: ">=", bound: 0.9}
	inFlightP99Target        = target{text: "≤ 1.00", op: "<=", bound: 1}
	inFlightErrorsTarget     = target{text: "= 0", op: "==", bound: 0}
	inFlightRSSTarget        = target{text: "< 200 MB", op: "<", bound: 200}
)

func (r *Results) addRatio(name string, conc int, v float64, t target, decimals int) {
	r.Ratios = append(r.Ratios, Ratio{Name: name, Concurrency: conc, Value: v, Target: t.text, Met: t.check(conc, v), decimals: decimals})
}

// computeRatios sets the comparisons for every concurrency where both
// sides ran, the slow provider's scaling, the storm and peak-RSS targets,
// and the scale-out runs' throughput against one instance.
func (r *Results) computeRatios(concs []int) {
	r.Ratios = nil
	type cmp struct {
		name, num, den string
		target         target
		p99            bool
	}
	for _, c := range []cmp{
		{"fresh (primary provider) / pgbench minimal exactly-once ceiling", "fresh", "pgbench-minimal", target{"≥ 0.50 at c=8, 32", ">=", 0.5, []int{8, 32}}, false},
		{"pgbench claim+finalize (chargeonce's own SQL) / pgbench minimal exactly-once ceiling", "pgbench-claim-finalize", "pgbench-minimal", target{"≥ 0.70 at c=8, 32", ">=", 0.7, []int{8, 32}}, false},
		{"bound: chargeonce's own SQL on a scratch database / the minimal ceiling beside it", "pgbench-bound-as-is", "pgbench-bound-minimal", target{text: "no numeric target"}, false},
		{"bound: own SQL without the row rules / the minimal ceiling beside it", "pgbench-bound-no-rules", "pgbench-bound-minimal", target{text: "no numeric target"}, false},
		{"bound: own SQL folded (no charge row, no queue entry) / the minimal ceiling beside it", "pgbench-bound-folded", "pgbench-bound-minimal", target{text: "no numeric target"}, false},
		{"bound: own SQL folded, without the row rules / the minimal ceiling beside it", "pgbench-bound-folded-no-rules", "pgbench-bound-minimal", target{text: "no numeric target"}, false},
		{"fresh (primary provider) / pgbench two-commit limit", "fresh", "pgbench-two-commit", target{text: "no numeric target"}, false},
		{"fresh (primary provider) / pgbench claim+finalize (chargeonce's own SQL)", "fresh", "pgbench-claim-finalize", target{text: "no numeric target"}, false},
		{"replay / trivial query throughput", "replay", "trivial", target{"≥ 0.70 at c=8, 32", ">=", 0.7, []int{8, 32}}, false},
		{"fresh / fresh on the baseline build (alternating slices)", "fresh-this", "fresh-baseline", baselineTarget, false},
		{"replay / replay on the baseline build (alternating slices)", "replay-this", "replay-baseline", baselineTarget, false},
		{"replay p99 / trivial p99", "replay", "trivial", target{"≤ 2.0", "<=", 2, nil}, true},
		{"replay without the result cache / trivial query throughput", "replay-uncached", "trivial", target{"≥ 0.50 at c=8, 32", ">=", 0.5, []int{8, 32}}, false},
		{"replay without the result cache p99 / trivial p99", "replay-uncached", "trivial", target{"≤ 2.0", "<=", 2, nil}, true},
		{"one empty database round trip: probe with it (/readyz) / probe without (/healthz)", "probe-db", "probe", target{text: "no numeric target"}, false},
		{"fresh with the stored keys / fresh", "fresh-grown", "fresh", target{"≥ 0.90 (stored keys cost < 10%)", ">=", 0.9, nil}, false},
		{"fresh with the cleanup alongside / fresh", "fresh-cleanup", "fresh", target{"≥ 0.80 (cleanup costs < 20%)", ">=", 0.8, nil}, false},
	} {
		for _, conc := range concs {
			n, d := r.run(c.num).at(conc), r.run(c.den).at(conc)
			if n == nil || d == nil {
				continue
			}
			v := 0.0
			switch {
			case c.p99 && d.P99ms > 0:
				v = n.P99ms / d.P99ms
			case !c.p99 && d.Throughput > 0:
				v = n.Throughput / d.Throughput
			}
			r.addRatio(c.name, conc, v, c.target, 2)
		}
	}
	r.uncachedBound(concs)
	if fresh := r.run("fresh"); fresh != nil {
		for _, f := range fresh.Figures {
			if f.WALBytesPerRequest > 0 {
				r.addRatio("fresh: WAL bytes per charge", f.Concurrency, f.WALBytesPerRequest, freshWALTarget, 0)
			}
		}
	}
	r.scalingRatios(concs)
	r.inFlightRatios()
	r.scaleOutRatios()
	if s := r.Storm; s != nil {
		if s.ProviderCharges >= 0 {
			r.addRatio("storm: provider charges for the one key", s.Requests, float64(s.ProviderCharges), stormChargesTarget, 0)
		}
		r.addRatio("storm: errors", s.Requests, float64(s.Errors), stormErrorsTarget, 0)
	}
	if rss := r.peakRSSMB(); rss > 0 {
		r.addRatio("server peak RSS, MB (the most of any run)", 0, rss, peakRSSTarget, 0)
	}
}

// uncachedBound is the most a replay without the result cache can reach
// over the trivial query at each concurrency, given what this run measured:
// it does at least a cached replay's work and one round trip to the
// database. On a saturated machine a request's cost is the inverse of its
// throughput, so one round trip costs 1/probe-db − 1/probe, and the
// uncached replay at least 1/replay plus that, even with a statement that
// did no work. Both give the stored answer to the same request, from the
// instance's memory or read from the database, so what the read's
// statement costs beyond an empty one is the gap.
func (r *Results) uncachedBound(concs []int) {
	for _, conc := range concs {
		replay, trivial := r.run("replay").at(conc), r.run("trivial").at(conc)
		probe, probeDB := r.run("probe").at(conc), r.run("probe-db").at(conc)
		if replay == nil || trivial == nil || probe == nil || probeDB == nil ||
			replay.Throughput == 0 || trivial.Throughput == 0 || probe.Throughput == 0 || probeDB.Throughput == 0 {
			continue
		}
		cost := 1/replay.Throughput + max(0, 1/probeDB.Throughput-1/probe.Throughput)
		r.addRatio("replay without the result cache / trivial query throughput: the most a cached replay's work and one empty round trip leave", conc,
			(1/trivial.Throughput)/cost, target{text: "no numeric target"}, 2)
	}
}

// scalingRatios compare the slow provider's throughput at c with c times its
// throughput at c=1: the fraction of linear scaling (1.0: nothing
// serializes). Only while the ideal, c / the delay, stays below the
// fresh-key ceiling at c (the simulator's own fresh run without delay), as
// beyond it the ceiling, not the wait, bounds the throughput.
func (r *Results) scalingRatios(concs []int) {
	slow := r.run("fresh-50ms")
	one := slow.at(1)
	if one == nil || one.Throughput == 0 {
		return
	}
	ceiling := r.run("fresh-cardsim")
	if ceiling == nil {
		ceiling = r.run("fresh")
	}
	for _, conc := range concs {
		f, top := slow.at(conc), ceiling.at(conc)
		if conc == 1 || f == nil || top == nil {
			continue
		}
		if ideal := float64(conc) / slowProviderDelay.Seconds(); ideal >= top.Throughput {
			continue
		}
		r.addRatio("fresh-50ms scaling: throughput / (c × throughput at c=1)", conc,
			f.Throughput/(one.Throughput*float64(conc)), scalingTarget, 2)
	}
}

// inFlightRatios measure the many checkouts in flight (fresh-300ms) at each
// of its concurrencies c against what it could do: c / the provider's
// delay, or the fresh-key throughput at c=32 where that is lower; its p99
// against twice the delay plus the fresh p99 at c=32; its errors; and its
// peak RSS.
func (r *Results) inFlightRatios() {
	fresh, inFlight := r.run("fresh").at(32), r.run("fresh-300ms")
	if fresh == nil || inFlight == nil {
		return
	}
	// Each figure's rows together, by concurrency, as the tables group them.
	for _, q := range []struct {
		name     string
		value    func(Figures) float64
		target   target
		decimals int
	}{
		{"fresh-300ms: throughput / min(c / 300 ms, fresh at c=32)", func(f Figures) float64 {
			return f.Throughput / min(float64(f.Concurrency)/inFlightDelay.Seconds(), fresh.Throughput)
		}, inFlightThroughputTarget, 2},
		{"fresh-300ms: p99 / (2 × 300 ms + fresh p99 at c=32)", func(f Figures) float64 {
			return f.P99ms / (2*ms(inFlightDelay) + fresh.P99ms)
		}, inFlightP99Target, 2},
		{"fresh-300ms: errors", func(f Figures) float64 { return float64(f.Errors) }, inFlightErrorsTarget, 0},
		{"fresh-300ms: server peak RSS, MB", func(f Figures) float64 { return f.PeakRSSMB }, inFlightRSSTarget, 0},
	} {
		for _, f := range inFlight.Figures {
			r.addRatio(q.name, f.Concurrency, q.value(f), q.target, q.decimals)
		}
	}
}

// scaleOutRatios set each scale-out figure's VsOneInstance: its throughput
// over that of the same load on one instance at the same concurrency; 0
// where that did not run. They stay with the figures rather than among the
// ratios: no target applies, and the scale-out table shows them beside the
// throughput they divide.
func (r *Results) scaleOutRatios() {
	for i := range r.ScaleOut {
		run := &r.ScaleOut[i]
		one := r.scaleOut(run.Name, 1)
		for j := range run.Figures {
			f := &run.Figures[j]
			f.VsOneInstance = 0
			if base := one.at(f.Concurrency); base != nil && base.Throughput > 0 {
				f.VsOneInstance = f.Throughput / base.Throughput
			}
		}
	}
}

// peakRSSMB is the highest peak RSS of any server in any run but the many
// checkouts in flight, which has a target of its own.
func (r *Results) peakRSSMB() float64 {
	var peak float64
	for _, run := range slices.Concat(r.Runs, r.ScaleOut) {
		if run.Name == "fresh-300ms" {
			continue
		}
		for _, f := range run.Figures {
			peak = max(peak, f.PeakRSSMB)
		}
	}
	if r.Storm != nil {
		peak = max(peak, r.Storm.PeakRSSMB)
	}
	return peak
}

// metText is how the tables show Met.
func (q Ratio) metText() string {
	switch {
	case q.Met == nil:
		return "–"
	case *q.Met:
		return "met"
	default:
		return "missed"
	}
}

func (q Ratio) valueText() string {
	return fmt.Sprintf("%.*f", q.decimals, q.Value)
}

func (q Ratio) concText() string {
	if q.Concurrency == 0 {
		return "–"
	}
	return fmt.Sprint(q.Concurrency)
}
