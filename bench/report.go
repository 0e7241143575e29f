package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
}

// Run is one kind of run at every concurrency.
type Run struct {
	Name     string    `json:"name"`
	What     string    `json:"what"`
	Provider string    `json:"provider,omitempty"`
	Figures  []Figures `json:"figures"`
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

// Ratio is one of the comparisons at one concurrency.
type Ratio struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency"`
	Value       float64 `json:"value"`
	Target      string  `json:"target"`
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
	Smoke    bool         `json:"smoke"`
	Duration string       `json:"duration_per_run"`
	Machine  Machine      `json:"machine"`
	Notes    []string     `json:"notes,omitempty"`
	Runs     []Run        `json:"runs"`
	Storm    *StormResult `json:"storm,omitempty"`
	Ratios   []Ratio      `json:"ratios"`
}

func (r *Results) run(name string) *Run {
	for i := range r.Runs {
		if r.Runs[i].Name == name {
			return &r.Runs[i]
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

// computeRatios sets the three comparisons for every concurrency
// where both sides ran.
func (r *Results) computeRatios(concs []int) {
	type cmp struct {
		name, num, den, target string
		p99                    bool
	}
	for _, c := range []cmp{
		{"fresh (primary provider) / pgbench claim+finalize", "fresh", "pgbench-claim-finalize", "≥ 0.50 at c=8, 32", false},
		{"replay / trivial query throughput", "replay", "trivial", "≥ 0.60", false},
		{"replay p99 / trivial p99", "replay", "trivial", "≤ 2.0", true},
		{"fresh with the stored keys / fresh", "fresh-grown", "fresh", "≥ 0.90 (stored keys cost < 10%)", false},
		{"fresh with the cleanup alongside / fresh", "fresh-cleanup", "fresh", "≥ 0.80 (cleanup costs < 20%)", false},
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
			r.Ratios = append(r.Ratios, Ratio{Name: c.name, Concurrency: conc, Value: v, Target: c.target})
		}
	}
}

func (r *Results) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	return r.chart(filepath.Join(dir, "chart.png"))
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
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("| run | concurrency | throughput /s | p50 ms | p99 ms | errors | server peak RSS MB |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.Runs {
		for _, f := range run.Figures {
			p50, p99, rss := fmt.Sprintf("%.2f", f.P50ms), fmt.Sprintf("%.2f", f.P99ms), fmt.Sprintf("%.0f", f.PeakRSSMB)
			if f.MeanLatency {
				p50, p99 = fmt.Sprintf("%.2f (mean)", f.P50ms), "–"
			}
			if f.PeakRSSMB == 0 {
				rss = "–"
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s | %d | %s |\n", run.Name, f.Concurrency, f.Throughput, p50, p99, f.Errors, rss)
		}
	}
	b.WriteString("\nRuns:\n\n")
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "- **%s**: %s\n", run.Name, run.What)
	}
	if len(r.Ratios) > 0 {
		b.WriteString("\n| ratio | concurrency | value | target |\n|---|---:|---:|---|\n")
		for _, q := range r.Ratios {
			fmt.Fprintf(&b, "| %s | %d | %.2f | %s |\n", q.Name, q.Concurrency, q.Value, q.Target)
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
	return b.String()
}
