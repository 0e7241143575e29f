package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"chargeonce/internal/markdown"
)

// docs/performance.md shows the latest full run between these markers; a
// full run into bench/results rewrites what lies between them.
const (
	readmeBegin = "<!-- bench:begin -->"
	readmeEnd   = "<!-- bench:end -->"
)

// readmeRuns are the runs docs/performance.md's table shows; results.md has
// them all.
var readmeRuns = []string{"fresh", "replay", "replay-uncached", "trivial", "fresh-50ms", "pgbench-minimal", "pgbench-two-commit", "pgbench-claim-finalize", "pgbench-replay-lookup"}

// render writes the results in opts.out again, with the ratios computed
// anew, and for bench/results the latest run in docs/performance.md: for a
// change to the report without a 10-minute run.
func render(opts options, stdout io.Writer) error {
	b, err := os.ReadFile(filepath.Join(opts.out, "results.json"))
	if err != nil {
		return err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(opts.out, "results.json"), err)
	}
	r.computeRatios(r.concurrencies())
	if err := r.write(opts.out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rendered %s\n", opts.out)
	if !opts.updatesReadme(&r) {
		return nil
	}
	if err := updateReadme(performancePath, &r); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s shows %s\n", performancePath, opts.out)
	return nil
}

// updateReadme rewrites the part of the document at path (docs/performance.md)
// between the markers with r.
func updateReadme(path string, r *Results) error {
	return markdown.UpdateFile(path, readmeBegin, readmeEnd, r.readmeSection())
}

// readmeSection is docs/performance.md's compact view of r: the machine, the
// targets met or missed, the key runs, the storm and the chart. Its links
// are relative to docs/.
func (r *Results) readmeSection() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "Latest full run: %s, %d cores; %s; %s; %s; %s per run.\n\n", m.CPU, m.Cores, m.Go, m.Postgres, m.Date, r.Duration)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}

	b.WriteString("| ratio or target | value | target | met |\n|---|---|---|---|\n")
	for _, g := range groupRatios(r.Ratios) {
		var vals, missed []string
		applies := 0
		for _, q := range g {
			if len(g) == 1 {
				vals = append(vals, q.valueText())
			} else {
				vals = append(vals, fmt.Sprintf("%s (c=%d)", q.valueText(), q.Concurrency))
			}
			if q.Met != nil {
				applies++
				if !*q.Met {
					missed = append(missed, fmt.Sprint(q.Concurrency))
				}
			}
		}
		met := "met"
		switch {
		case applies == 0:
			met = "–"
		case len(missed) == applies:
			met = "missed"
		case len(missed) > 0:
			met = "missed at c=" + strings.Join(missed, ", ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g[0].Name, strings.Join(vals, " · "), g[0].Target, met)
	}

	concs := r.concurrencies()
	b.WriteString("\n| run (throughput /s, p99 ms) |")
	for _, c := range concs {
		fmt.Fprintf(&b, " c=%d |", c)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(concs)) + "\n")
	for _, name := range readmeRuns {
		run := r.run(name)
		if run == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s |", name)
		for _, c := range concs {
			switch f := run.at(c); {
			case f == nil:
				b.WriteString(" – |")
			case f.MeanLatency:
				fmt.Fprintf(&b, " %.0f /s, mean %s ms |", f.Throughput, msText(f.P50ms))
			default:
				fmt.Fprintf(&b, " %.0f /s, p99 %s ms |", f.Throughput, msText(f.P99ms))
			}
		}
		b.WriteString("\n")
	}
	if s := r.Storm; s != nil {
		fmt.Fprintf(&b, "\nDuplicate storm: %d concurrent requests with one key over %d instances; every client held the final result after %.0f ms.\n",
			s.Requests, s.Instances, s.AllFinalMs)
	}
	if len(r.Latency) > 0 {
		b.WriteString("\nEvent latency, from the time a charge's success is recorded with to its arrival (fresh charges, a 300 ms provider):\n\n")
		for _, l := range r.Latency {
			b.WriteString("- " + l.summary() + "\n")
		}
	}
	if len(r.ScaleOut) > 0 {
		b.WriteString("\nScale-out, the same load spread round-robin over more instances on this machine:\n\n")
		for _, line := range r.scaleOutSummary() {
			b.WriteString("- " + line + "\n")
		}
	}
	b.WriteString("\nEvery run, with p50, errors and peak RSS, the growth and scale-out runs and what each run does: [bench/results/results.md](../bench/results/results.md).\n\n")
	b.WriteString("![Throughput and p99 latency against concurrency, one line per run](../bench/results/chart.png)\n")
	return b.String()
}

// scaleOutSummary is a line for each scale-out load: its throughput and
// p99 over each number of instances, with the ratio to one.
func (r *Results) scaleOutSummary() []string {
	var lines []string
	for _, name := range r.scaleOutNames() {
		var parts []string
		conc := 0
		for _, run := range r.ScaleOut {
			if run.Name != name || len(run.Figures) == 0 {
				continue
			}
			f := run.Figures[0]
			conc = f.Concurrency
			part := fmt.Sprintf("%d: %.0f /s, p99 %s ms", run.Instances, f.Throughput, msText(f.P99ms))
			if run.Instances > 1 && f.VsOneInstance > 0 {
				part += fmt.Sprintf(" (× %.2f)", f.VsOneInstance)
			}
			parts = append(parts, part)
		}
		lines = append(lines, fmt.Sprintf("%s, c=%d, by instances: %s", name, conc, strings.Join(parts, " · ")))
	}
	return lines
}

// msText keeps two significant decimals below 10 ms, one above.
func msText(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// groupRatios splits ratios into runs of the same name, in order.
func groupRatios(ratios []Ratio) [][]Ratio {
	var groups [][]Ratio
	for _, q := range ratios {
		if n := len(groups); n > 0 && groups[n-1][0].Name == q.Name {
			groups[n-1] = append(groups[n-1], q)
			continue
		}
		groups = append(groups, []Ratio{q})
	}
	return groups
}

// concurrencies are those any run ran at, in order.
func (r *Results) concurrencies() []int {
	var concs []int
	for _, run := range r.Runs {
		for _, f := range run.Figures {
			if !slices.Contains(concs, f.Concurrency) {
				concs = append(concs, f.Concurrency)
			}
		}
	}
	slices.Sort(concs)
	return concs
}
