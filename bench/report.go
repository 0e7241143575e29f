package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"chargeonce/internal/markdown"
)

// Figures are one run at one concurrency.
type Figures struct {
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	Throughput  float64 `json:"throughput_per_s"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	// MeanMs is pgbench's own mean latency, beside the percentiles read
	// from its transaction logs.
	MeanMs float64 `json:"mean_ms,omitempty"`
	// MeanLatency marks results written before pgbench had percentiles:
	// P50ms holds its mean latency, and P99ms nothing.
	MeanLatency bool    `json:"mean_latency,omitempty"`
	Errors      int     `json:"errors"`
	PeakRSSMB   float64 `json:"peak_rss_mb,omitempty"`
	// CommitsPerRequest (transactions that wrote) and WALBytesPerRequest
	// are what the whole database did during a server run (every background
	// loop too, not only the requests' own statements), per request answered.
	CommitsPerRequest  float64 `json:"commits_per_request,omitempty"`
	WALBytesPerRequest float64 `json:"wal_bytes_per_request,omitempty"`
	// VsOneInstance is, for a scale-out run, the throughput over that of the
	// same load on one instance at the same concurrency (computeRatios).
	VsOneInstance float64 `json:"throughput_vs_one_instance,omitempty"`
}

// Run is one kind of run at every concurrency.
type Run struct {
	Name     string `json:"name"`
	What     string `json:"what"`
	Provider string `json:"provider,omitempty"`
	// Instances is how many servers shared the load, round-robin, in a
	// scale-out run; 0 in the others, which have one.
	Instances int       `json:"instances,omitempty"`
	Figures   []Figures `json:"figures"`
}

// label names the run in the log and the profiles: a scale-out run's name
// once for each number of instances.
func (run *Run) label() string {
	if run.Instances == 0 {
		return run.Name
	}
	return fmt.Sprintf("%s-%dx", run.Name, run.Instances)
}

// StormResult is the duplicate storm.
type StormResult struct {
	Key               string  `json:"key"`
	Requests          int     `json:"requests"`
	Instances         int     `json:"instances"`
	ProviderCharges   int     `json:"provider_charges"` // -1: not counted (no simulator ledger)
	Errors            int     `json:"errors"`
	ProcessingAnswers int     `json:"processing_answers"`
	AllFinalMs        float64 `json:"all_final_ms"`
	PeakRSSMB         float64 `json:"peak_rss_mb"`
}

// Machine says where the figures were taken.
type Machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	Go       string `json:"go"`
	Postgres string `json:"postgres"`
	Date     string `json:"date"`
}

// Results is everything one bench writes.
type Results struct {
	Smoke    bool     `json:"smoke"`
	Duration string   `json:"duration_per_run"`
	Machine  Machine  `json:"machine"`
	Notes    []string `json:"notes,omitempty"`
	// Baseline names the build the baseline runs compared this one with.
	Baseline string       `json:"baseline,omitempty"`
	Runs     []Run        `json:"runs"`
	Storm    *StormResult `json:"storm,omitempty"`
	// ScaleOut are the scale-out runs, one per load and number of
	// instances; apart from Runs, whose tables and chart are by concurrency.
	ScaleOut []Run `json:"scale_out,omitempty"`
	// Latency is how fast a charge's event reaches the stream and a
	// live-status subscriber (eventLatencies).
	Latency []EventLatency `json:"event_latency,omitempty"`
	Ratios  []Ratio        `json:"ratios"`
}

func (r *Results) run(name string) *Run {
	for i := range r.Runs {
		if r.Runs[i].Name == name {
			return &r.Runs[i]
		}
	}
	return nil
}

// scaleOutNames are the scale-out runs' loads, in the order they ran.
func (r *Results) scaleOutNames() []string {
	var names []string
	for _, run := range r.ScaleOut {
		if !slices.Contains(names, run.Name) {
			names = append(names, run.Name)
		}
	}
	return names
}

// scaleOut is the scale-out run of the load name over n instances.
func (r *Results) scaleOut(name string, n int) *Run {
	for i := range r.ScaleOut {
		if r.ScaleOut[i].Name == name && r.ScaleOut[i].Instances == n {
			return &r.ScaleOut[i]
		}
	}
	return nil
}

func (run *Run) at(conc int) *Figures {
	if run == nil {
		return nil
	}
	for i := range run.Figures {
		if run.Figures[i].Concurrency == conc {
			return &run.Figures[i]
		}
	}
	return nil
}

func (r *Results) write(dir string) error {
	if err := markdown.WriteResults(dir, r, r.markdown()); err != nil {
		return err
	}
	chart := filepath.Join(dir, "chart.png")
	if len(r.Runs) == 0 {
		// Only groups outside the table by concurrency ran (-only storm,
		// scaleout): no line to draw, where gonum's log scales panic. Nor
		// should an earlier run's chart stay beside these results.
		if err := os.Remove(chart); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return r.chart(chart)
}

func (r *Results) markdown() string {
	var b strings.Builder
	title := "chargeonce benchmark"
	if r.Smoke {
		title += " (smoke: short runs, no targets)"
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	m := r.Machine
	fmt.Fprintf(&b, "%s, %d cores; %s; %s; %s. Server, PostgreSQL and load generator share the machine; %s per run, closed loop (each client sends its next request when the last is answered).\n\n",
		m.CPU, m.Cores, m.Go, m.Postgres, m.Date, r.Duration)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if r.Baseline != "" {
		fmt.Fprintf(&b, "- The baseline runs (`-baseline`) compare this build with %s: both servers up on the same PostgreSQL, loaded in alternating slices.\n", r.Baseline)
	}
	if len(r.Notes) > 0 || r.Baseline != "" {
		b.WriteString("\n")
	}
	// A partial run of the storm or the scale-out alone has no run by
	// concurrency.
	if len(r.Runs) > 0 {
		b.WriteString("| run | concurrency | throughput /s | p50 ms | p99 ms | errors | server peak RSS MB | writing transactions / request | WAL bytes / request |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, run := range r.Runs {
			for _, f := range run.Figures {
				p50, p99, rss := fmt.Sprintf("%.2f", f.P50ms), fmt.Sprintf("%.2f", f.P99ms), fmt.Sprintf("%.0f", f.PeakRSSMB)
				if f.MeanLatency {
					p50, p99 = fmt.Sprintf("%.2f (mean)", f.P50ms), "–"
				}
				if f.PeakRSSMB == 0 {
					rss = "–"
				}
				commits, wal := "–", "–"
				if f.CommitsPerRequest > 0 || f.WALBytesPerRequest > 0 {
					commits, wal = fmt.Sprintf("%.2f", f.CommitsPerRequest), fmt.Sprintf("%.0f", f.WALBytesPerRequest)
				}
				fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s | %d | %s | %s | %s |\n", run.Name, f.Concurrency, f.Throughput, p50, p99, f.Errors, rss, commits, wal)
			}
		}
		b.WriteString("\nRuns:\n\n")
		for _, run := range r.Runs {
			fmt.Fprintf(&b, "- **%s**: %s\n", run.Name, run.What)
		}
	}
	if len(r.Ratios) > 0 {
		b.WriteString("\n| ratio or target | concurrency | value | target | met |\n|---|---:|---:|---|---|\n")
		for _, q := range r.Ratios {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", q.Name, q.concText(), q.valueText(), q.Target, q.metText())
		}
		if r.run("fresh-50ms") != nil {
			fmt.Fprintf(&b, "\nThe fresh-50ms scaling is shown where the ideal, c / %s, stays below the fresh-key ceiling at c (fresh-cardsim, else fresh); beyond it the ceiling, not the wait, bounds the throughput.\n", slowProviderDelay)
		}
		if r.Storm != nil {
			b.WriteString("\nThe storm's concurrency is its number of requests; the peak RSS includes its two servers.\n")
		}
	}
	if s := r.Storm; s != nil {
		charges := fmt.Sprint(s.ProviderCharges)
		if s.ProviderCharges < 0 {
			charges = "not counted"
		}
		fmt.Fprintf(&b, "\n**Duplicate storm**: %d concurrent requests with one key over %d instances: provider charges %s (must be 1), errors %d (must be 0), PROCESSING answers asked again %d, every client held the final result after %.0f ms; peak RSS %.0f MB.\n",
			s.Requests, s.Instances, charges, s.Errors, s.ProcessingAnswers, s.AllFinalMs, s.PeakRSSMB)
	}
	if len(r.Latency) > 0 {
		fmt.Fprintf(&b, "\n**Event latency**, under %s, from the time a charge's success is recorded with (taken just before the statement that commits it) to its arrival at a consumer of the stream `CHARGES` and at a live-status subscriber (`chargeUpdated` over server-sent events):\n\n", r.Latency[0].Load)
		b.WriteString("| concurrency | charges /s | errors | to the stream: samples | p50 ms | p99 ms | to a subscriber: samples | p50 ms | p99 ms |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, l := range r.Latency {
			fmt.Fprintf(&b, "| %d | %.0f | %d | %d | %.2f | %.2f | %d | %.2f | %.2f |\n", l.Concurrency, l.Throughput, l.Errors,
				l.Stream.Count, l.Stream.P50ms, l.Stream.P99ms, l.Subscriber.Count, l.Subscriber.P50ms, l.Subscriber.P99ms)
		}
	}
	r.scaleOutMarkdown(&b)
	return b.String()
}

// scaleOutMarkdown writes the scale-out runs' table, if any ran.
func (r *Results) scaleOutMarkdown(b *strings.Builder) {
	if len(r.ScaleOut) == 0 {
		return
	}
	most := 0
	for _, run := range r.ScaleOut {
		most = max(most, run.Instances)
	}
	fmt.Fprintf(b, "\n## Scale-out (instances on one machine)\n\nThe same load spread round-robin over 1 to %d instances of the server (separate processes on the same PostgreSQL); the concurrency counts the clients in all, not per instance. × 1 instance is the throughput over that of one instance at the same concurrency (1.0: no gain; the number of instances: linear). The instances share the machine's %d cores with PostgreSQL and the load generator, so this says what one more process on the same machine gains, not what more machines would.\n\n",
		most, r.Machine.Cores)
	b.WriteString("| run | instances | concurrency | throughput /s | × 1 instance | p50 ms | p99 ms | errors | peak RSS MB (any instance) | writing transactions / request |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.ScaleOut {
		for _, f := range run.Figures {
			vs, commits := "–", "–"
			if f.VsOneInstance > 0 {
				vs = fmt.Sprintf("%.2f", f.VsOneInstance)
			}
			if f.CommitsPerRequest > 0 {
				commits = fmt.Sprintf("%.2f", f.CommitsPerRequest)
			}
			fmt.Fprintf(b, "| %s | %d | %d | %.0f | %s | %.2f | %.2f | %d | %.0f | %s |\n",
				run.Name, run.Instances, f.Concurrency, f.Throughput, vs, f.P50ms, f.P99ms, f.Errors, f.PeakRSSMB, commits)
		}
	}
	b.WriteString("\n")
	for _, name := range r.scaleOutNames() {
		for _, run := range r.ScaleOut {
			if run.Name == name {
				fmt.Fprintf(b, "- **%s**: %s\n", name, run.What)
				break
			}
		}
	}
}
