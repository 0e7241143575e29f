package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"chargeonce/cardsim"
	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/merchant"
	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
)

// The hostile documents of the benchmark and of the process test
// (systest/document_test.go builds its own at the server's limit): the
// worst a stranger can send in one body of the default limit.

// hostileDocuments are the worst documents within a body of maxBody bytes
// that the bounds refuse, by what they repeat, with room for a nonce
// (withNonce).
func hostileDocuments(maxBody int) []namedDocument {
	maxBody -= escapedSize(withNonce("", 0))
	return []namedDocument{
		{"repeated fields", fill(maxBody, "{", func(int) string { return "__typename " }, "}")},
		{"repeated fields with arguments", fill(maxBody, "{", func(int) string { return `__type(name: "Query") { name } ` }, "}")},
		{"repeated fields, conflicting arguments", fill(maxBody, "{", func(i int) string { return fmt.Sprintf(`__type(name: "T%d") { name } `, i) }, "}")},
		{"deep fragments", fill(maxBody, "{ ...F0 }", func(i int) string {
			return fmt.Sprintf(" fragment F%d on Query { __typename ...F%d }", i, i+1)
		}, " fragment Fz on Query { __typename }")},
		{"fragments spreading the next twice", fill(maxBody, "{ __schema { types { ...F0 } } }", func(i int) string {
			return fmt.Sprintf(" fragment F%d on __Type { name ofType { ...F%d } a: ofType { ...F%d } }", i, i+1, i+1)
		}, " fragment Fz on __Type { name }")},
		{"many aliases", fill(maxBody, "{", func(i int) string { return fmt.Sprintf("a%d: __typename ", i) }, "}")},
		{"many directives", fill(maxBody, "{ __typename", func(int) string { return " @include(if: true)" }, " }")},
		{"many fields with a directive", fill(maxBody, "{", func(i int) string { return fmt.Sprintf("a%d: __typename @skip(if: false) ", i) }, "}")},
		{"many inline fragments", fill(maxBody, "{", func(int) string { return "... on Query { __typename } " }, "}")},
		{"nested inline fragments", fill(maxBody, "{ ", func(int) string {
			// As deep as the parser nests (gqlparser's MaxNestingDepth is 1000).
			return strings.Repeat("... { ", 900) + "__typename" + strings.Repeat(" }", 900) + " "
		}, "}")},
	}
}

type namedDocument struct{ name, query string }

// fill is open, then as many parts (numbered from 0) as a request body of
// maxBody bytes holds with close.
func fill(maxBody int, open string, part func(i int) string, close string) string {
	var b strings.Builder
	b.WriteString(open)
	size := requestSize(open + close)
	for i := 0; ; i++ {
		p := part(i)
		if size+escapedSize(p) > maxBody {
			break
		}
		size += escapedSize(p)
		b.WriteString(p)
	}
	b.WriteString(close)
	return b.String()
}

// requestSize is the size of a POST body {"query": q}.
func requestSize(q string) int {
	b, _ := json.Marshal(map[string]string{"query": q})
	return len(b)
}

// withNonce makes query a document of its own, as an attacker would, so
// that no two requests of a run meet in the executor's query cache.
func withNonce(query string, i int) string { return fmt.Sprintf("#%08d\n", i) + query }

// escapedSize is what s adds to a request's size.
func escapedSize(s string) int { return requestSize(s) - requestSize("") }

// worstAccepted are documents just inside the bounds, each built to cost
// the most of one kind: they go through validation, and they run.
func worstAccepted() []namedDocument {
	repeat := func(n int, s func(int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(s(i))
		}
		return b.String()
	}
	// A tree of fields that share one response name at every level, as
	// wide as the repeats allow: what the overlapping-fields rule compares
	// most, written out and through fragments (the fragment bound counts
	// spreads, 85 here).
	var inline func(depth int) string
	inline = func(depth int) string {
		if depth == 0 {
			return "name"
		}
		return repeat(MaxResponseNameRepeats, func(int) string { return "ofType { " + inline(depth-1) + " } " })
	}
	const inlineDepth = 3 // 4+16+64 ofType and 64 names: 4 levels would be 5 times the tokens
	viaFragments := "{ __schema { types { ...T0 } } }" +
		repeat(3, func(i int) string {
			return fmt.Sprintf(" fragment T%d on __Type { %s}", i, repeat(MaxResponseNameRepeats, func(int) string {
				return fmt.Sprintf("ofType { ...T%d } ", i+1)
			}))
		}) + " fragment T3 on __Type { name }"
	return []namedDocument{
		{"accepted: one name repeated in a tree", "{ __schema { types { " + inline(inlineDepth) + "} } }"},
		{"accepted: one name repeated in a tree of fragments", viaFragments},
		{"accepted: aliases, directives and fragments at their bounds", "{ " +
			repeat(MaxDocumentAliases, func(i int) string {
				if i < MaxDocumentDirectives {
					return fmt.Sprintf("a%d: __typename @include(if: true) ", i)
				}
				return fmt.Sprintf("a%d: __typename ", i)
			}) +
			strings.Repeat("... on Query { ", MaxDocumentFragments) + "__typename" + strings.Repeat(" }", MaxDocumentFragments) + " }"},
		{"accepted: introspection, as often as the complexity limit lets it run", "{ " +
			repeat(complexityLimit/4, func(i int) string { return fmt.Sprintf("s%d: __schema { types { fields { name } } } ", i) }) + "}"},
	}
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDocument measures the server's CPU per request (cpu-ns/op, the
// process's user and system time over the run, divided by b.N) of a normal
// chargeCard and of each hostile document, all through the real handler on
// a real PostgreSQL, and reports each hostile document's cost as a multiple
// of the chargeCard's (x-charge). The goal: at most 10.
//
// The chargeCard's figure is a fresh charge, the costlier kind: the
// handler, the claim and the finalize (PostgreSQL's own work is another
// process's), and the card simulator, which runs in this process behind a
// loopback HTTP server, as graph/fuzz_test.go mounts it: its handler and
// the HTTP round trip count too.
//
//	go test -run '^$' -bench Document -benchtime 200x ./graph/
func BenchmarkDocument(b *testing.B) {
	pool := dbtest.NewPool(b, cardsimtest.Schema)
	sim := httptest.NewServer(cardsim.NewHandler(pool, cardsim.Config{}))
	b.Cleanup(sim.Close)
	merchants := merchant.New(pool, true)
	if _, err := merchants.EnsureDevelopmentKey(context.Background(), "demo", "demo-key", merchant.KeySecret); err != nil {
		b.Fatal(err)
	}
	svc := payment.NewService(pool, simprovider.New(sim.URL, 5*time.Second, nil), payment.Config{})
	// Development: introspection runs, the costlier of the two.
	h := NewHandler(&Resolver{Payments: svc, Merchants: merchants}, HandlerConfig{})

	var charge float64
	b.Run("chargeCard", func(b *testing.B) {
		cpu := cpuTime(b)
		for range b.N {
			body := `{"query":` + jsonString(chargeMutation) + `,"variables":{"key":"` + uuid.NewString() +
				`","input":{"amount":1999,"currency":"USD","paymentMethod":"pm_card_visa"}}}`
			rec := serve(h, body, "Bearer demo-key")
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "SUCCEEDED") {
				b.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
			}
		}
		charge = float64(cpuTime(b)-cpu) / float64(b.N)
		b.ReportMetric(charge, "cpu-ns/op")
	})
	docs := append(hostileDocuments(MaxBodyBytesDefault), worstAccepted()...)
	docs = append(docs, namedDocument{"accepted: GraphiQL's introspection query", readRepoFile(b, "graph/testdata/documents/introspection.graphql")})
	nonce := 0
	for _, d := range docs {
		b.Run(d.name, func(b *testing.B) {
			bodies := make([]string, b.N)
			for i := range bodies {
				nonce++
				body, _ := json.Marshal(map[string]string{"query": withNonce(d.query, nonce)})
				bodies[i] = string(body)
			}
			cpu := cpuTime(b)
			for _, body := range bodies {
				// Without a key, as a stranger sends it.
				if rec := serve(h, body, ""); rec.Code != http.StatusOK {
					b.Fatalf("HTTP %d: %.300s", rec.Code, rec.Body)
				}
			}
			perOp := float64(cpuTime(b)-cpu) / float64(b.N)
			b.ReportMetric(perOp, "cpu-ns/op")
			if charge > 0 {
				b.ReportMetric(perOp/charge, "x-charge")
			}
		})
	}
}

// serve sends one POST /graphql through h.
func serve(h http.Handler, body, authorization string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	req.RemoteAddr = "192.0.2.1:4321"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
