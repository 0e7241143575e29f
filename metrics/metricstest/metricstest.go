// Package metricstest reads a chargeonce server's /metrics for tests: one
// scrape is every sample of every metric, by name (a histogram's _count and
// _sum are samples of their own), and Value sums the samples with given
// labels. The API tests and the process tests both read metrics this way.
package metricstest

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// TestingT is what Scrape needs of a test: a *testing.T, or the collector of
// an EventuallyWithT condition.
type TestingT interface {
	Errorf(format string, args ...any)
	FailNow()
}

// Samples is one scrape.
type Samples map[string][]Sample

// Sample is one line of a scrape: its labels and its value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// Scrape reads the /metrics endpoint at url, in Prometheus' text format,
// over client; it fails t when the endpoint does not answer 200 with
// samples it can read.
func Scrape(t TestingT, client *http.Client, url string) Samples {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	s, err := scrape(client, url)
	if err != nil {
		t.Errorf("metricstest: %v", err)
		t.FailNow()
	}
	return s
}

func scrape(client *http.Client, url string) (Samples, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	samples := Samples{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%s: not a sample: %q", url, line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", url, line, err)
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = p[2]
		}
		samples[m[1]] = append(samples[m[1]], Sample{Labels: labels, Value: v})
	}
	return samples, nil
}

// Value sums the samples of name that carry the given label pairs (name,
// value, name, value, …); 0 when there are none (a labelled counter
// appears only once it moves).
func (s Samples) Value(name string, labels ...string) float64 {
	sum := 0.0
next:
	for _, sample := range s[name] {
		for i := 0; i+1 < len(labels); i += 2 {
			if sample.Labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		sum += sample.Value
	}
	return sum
}
