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

	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/merchant"
	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
)

// The documents of BenchmarkDocument (and of TestDocumentLimits_Benchmark…,
// which checks that each is what its name says): the worst a stranger can
// send in one body, refused, and the worst within the bounds.

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

// repeat is s(0) … s(n-1).
func repeat(n int, s func(i int) string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(s(i))
	}
	return b.String()
}

// sameNameTrees are trees of fields that share one response name at every
// level, as wide as the repeats of one selection set allow: what the
// overlapping-fields rule compares most, thousands of pairs in a few
// hundred fields, unless the repeats are counted at each response path.
func sameNameTrees() []namedDocument {
	var tree func(names []string) string
	tree = func(names []string) string {
		if len(names) == 1 {
			return repeat(MaxResponseNameRepeats, func(int) string { return names[0] + " " })
		}
		return repeat(MaxResponseNameRepeats, func(int) string { return names[0] + " { " + tree(names[1:]) + "} " })
	}
	return []namedDocument{
		// 4+16+64 fields and 256 names: 341 fields, 513 tokens.
		{"one name in a tree of four levels", "{ __schema { " + tree([]string{"types", "fields", "type", "name"}) + "} }"},
		// The same through fragments: 85 spreads.
		{"one name in a tree of fragments", "{ __schema { types { ...T0 } } }" +
			repeat(3, func(i int) string {
				return fmt.Sprintf(" fragment T%d on __Type { %s}", i, repeat(MaxResponseNameRepeats, func(int) string {
					return fmt.Sprintf("ofType { ...T%d } ", i+1)
				}))
			}) + " fragment T3 on __Type { name }"},
	}
}

// worstAccepted are documents just inside the bounds, each built to cost
// the most of one kind: they go through validation, and they run.
func worstAccepted() []namedDocument {
	// Most of the schema, 124 fields at as many response paths.
	schema := `types { kind name description specifiedByURL
		fields(includeDeprecated: true) { name description isDeprecated deprecationReason
			args { name description defaultValue type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } }
			type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } }
		inputFields { name description defaultValue type { kind name ofType { kind name ofType { kind name } } } }
		interfaces { kind name ofType { kind name ofType { kind name ofType { kind name } } } }
		enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
		possibleTypes { kind name ofType { kind name ofType { kind name ofType { kind name } } } } }
	queryType { name kind description } mutationType { name kind description } subscriptionType { name kind description }
	directives { name description locations isRepeatable
		args { name description defaultValue type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }
	description `
	return []namedDocument{
		{"every response path four times", "{ __schema { " + repeat(MaxResponseNameRepeats, func(int) string { return schema }) + "} }"},
		{"aliases, directives and fragments at their bounds", "{ " +
			repeat(MaxDocumentAliases, func(i int) string {
				if i < MaxDocumentDirectives {
					return fmt.Sprintf("a%d: __typename @include(if: true) ", i)
				}
				return fmt.Sprintf("a%d: __typename ", i)
			}) +
			strings.Repeat("... on Query { ", MaxDocumentFragments) + "__typename" + strings.Repeat(" }", MaxDocumentFragments) + " }"},
		{"100 aliased chargeCard fields, refused after validation", "mutation { " +
			repeat(MaxDocumentAliases, func(i int) string {
				return fmt.Sprintf(`c%d: chargeCard(idempotencyKey: "flood-%d", input: {amount: 100, currency: "USD", paymentMethod: "pm_card_visa"}) { status } `, i, i)
			}) + "}"},
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
// "refused" are the hostile documents; "accepted" those within the bounds,
// which validation then reads whole, through a development handler, where
// introspection runs (once a document: MaxIntrospectionFields), and a
// production one, which refuses introspection before it runs.
//
// The chargeCard's figure is a fresh charge, the costlier kind: the
// handler, the claim and the finalize (PostgreSQL's own work is another
// process's), and the card simulator, which runs in this process behind a
// loopback HTTP server, as graph/fuzz_test.go mounts it: its handler and
// the HTTP round trip count too.
//
//	go test -run '^$' -bench Document -benchtime 200x ./graph/
func BenchmarkDocument(b *testing.B) {
	h := documentHandler(b, HandlerConfig{})
	// Production refuses introspection after validation: the accepted
	// documents go through both.
	prod := documentHandler(b, HandlerConfig{Production: true})

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
	// A replay, the cheapest request that runs: its document, like every
	// client's, is in the query cache, and the bounds let it by.
	b.Run("chargeCard replayed", func(b *testing.B) {
		body := `{"query":` + jsonString(chargeMutation) + `,"variables":{"key":"` + uuid.NewString() +
			`","input":{"amount":1999,"currency":"USD","paymentMethod":"pm_card_visa"}}}`
		serve(h, body, "Bearer demo-key")
		cpu := cpuTime(b)
		for range b.N {
			if rec := serve(h, body, "Bearer demo-key"); !strings.Contains(rec.Body.String(), `"replayed":true`) {
				b.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
	type run struct {
		name    string
		h       http.Handler
		queries []namedDocument
	}
	accepted := append(worstAccepted(), namedDocument{"GraphiQL's introspection query", readRepoFile(b, "graph/testdata/documents/introspection.graphql")})
	nonce := 0
	refused := append(hostileDocuments(MaxBodyBytesDefault), sameNameTrees()...)
	for _, r := range []run{{"refused", h, refused}, {"accepted", h, accepted}, {"accepted in production", prod, accepted}} {
		for _, d := range r.queries {
			b.Run(r.name+": "+d.name, func(b *testing.B) {
				bodies := make([]string, b.N)
				for i := range bodies {
					nonce++
					body, _ := json.Marshal(map[string]string{"query": withNonce(d.query, nonce)})
					bodies[i] = string(body)
				}
				cpu := cpuTime(b)
				for _, body := range bodies {
					// Without a key, as a stranger sends it.
					if rec := serve(r.h, body, ""); rec.Code != http.StatusOK {
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
}

// serve sends one POST /graphql through h.
// documentHandler is the whole /graphql handler of cfg on a real
// PostgreSQL, with the demo merchant's secret key (demo-key) and the card
// simulator behind a loopback HTTP server, as graph/fuzz_test.go mounts it.
func documentHandler(tb testing.TB, cfg HandlerConfig) http.Handler {
	tb.Helper()
	pool := dbtest.NewPool(tb, cardsimtest.Schema)
	sim := cardsimtest.Start(tb, pool, cardsimtest.Options{})
	merchants := merchant.New(pool, true)
	if _, err := merchants.EnsureDevelopmentKey(context.Background(), "demo", "demo-key", merchant.KeySecret); err != nil {
		tb.Fatal(err)
	}
	svc := payment.NewService(pool, simprovider.New(sim.URL, 5*time.Second, nil), payment.Config{})
	return NewHandler(&Resolver{Payments: svc, Merchants: merchants}, cfg)
}

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
