package graph

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// FuzzDocumentLimits sends documents, built by a small generator that the
// fuzzer's bytes drive (or given raw), through the whole /graphql handler
// on a real PostgreSQL, with a key. Whatever the document: never a 5xx nor
// INTERNAL_SERVER_ERROR; every error has a code and a message; a document
// refused for its shape is refused by a bound it breaks, named in the
// message; and one a reference count finds over a bound is refused.
func FuzzDocumentLimits(f *testing.F) {
	for _, seed := range []struct {
		gen []byte
		raw string
	}{
		{[]byte{0}, ""},
		{[]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, ""},
		{[]byte{200, 6, 1, 6, 2, 6, 3, 5, 250, 0, 250, 1, 250, 2}, ""},
		{[]byte("a generator of selection sets, fragments, aliases, directives and arguments"), ""},
		{[]byte{255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255}, ""},
		{nil, repeatedTypename(MaxResponseNameRepeats)},
		{nil, repeatedTypename(MaxResponseNameRepeats + 1)},
		{nil, `{ ...A } fragment A on Query { __typename ...B ...B } fragment B on Query { __typename ...A }`},
		{nil, `{ __schema { types { ...T ...T ...T ...T ...T } } } fragment T on __Type { name }`},
		{nil, `{ a: __typename b: __typename a: __schema { description } }`},
		{nil, `query($k: String!) { chargeStatus(idempotencyKey: $k) @include(if: true) { status } c: chargeStatus(idempotencyKey: "x") { status } }`},
		{nil, `{ chargeStatus(idempotencyKey: "a") { status } chargeStatus(idempotencyKey: "b") { status } }`},
		{nil, `subscription { chargeUpdated(idempotencyKey: "k") { status status status status status } }`},
		{nil, `{ __typename ` + strings.Repeat("#\n", MaxDocumentTokens) + `}`},
		{nil, `{ __typename } fragment U on Query { a: __typename ...U }`},
		{nil, `{ ... on Query { ... on Query { ... { __typename @skip(if: false) } } } }`},
		{nil, "{"}, {nil, ""}, {nil, "\x00"}, {nil, `query Q { __typename } query Q { __typename }`},
	} {
		f.Add(seed.gen, seed.raw)
	}

	// The generator writes queries and subscriptions only: nothing charges.
	h := documentHandler(f, HandlerConfig{})

	f.Fuzz(func(t *testing.T, gen []byte, raw string) {
		query := raw
		if raw == "" {
			query = generateDocument(gen)
		}
		body, err := json.Marshal(map[string]string{"query": query})
		if err != nil || len(body) > MaxBodyBytesDefault {
			return // the edge's business (413), not the document's
		}
		rec := serve(h, string(body), "Bearer demo-key")
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
		}
		var a answer
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Fatalf("HTTP %d: not JSON (%v): %.500s", rec.Code, err, rec.Body)
		}
		if len(a.Errors) == 0 && (len(a.Data) == 0 || string(a.Data) == "null") {
			t.Fatalf("neither data nor errors: %s", rec.Body)
		}
		refusedFor := ""
		for _, e := range a.Errors {
			code, _ := e.Extensions["code"].(string)
			if code == "" || e.Message == "" {
				t.Fatalf("an error without a code or a message: %s", rec.Body)
			}
			if code == "INTERNAL_SERVER_ERROR" {
				t.Fatalf("INTERNAL_SERVER_ERROR for %q: %s", query, rec.Body)
			}
			if code == codeComplexityLimit && strings.HasPrefix(e.Message, "the document ") {
				refusedFor = e.Message
			}
		}

		over := overBounds(t, query)
		switch {
		case refusedFor != "":
			if len(a.Errors) != 1 {
				t.Fatalf("a refusal comes alone: %s", rec.Body)
			}
			if !slices.Contains(over, "unknown") && !slices.Contains(over, boundNamed(refusedFor)) {
				t.Fatalf("refused %q, but the reference count breaks %v: %q", refusedFor, over, query)
			}
		case len(over) > 0 && over[0] != "unknown":
			t.Fatalf("not refused, but the reference count breaks %v: %s\n%q", over, rec.Body, query)
		}
	})
}

// boundNamed is which bound a refusal's message names.
func boundNamed(message string) string {
	for _, b := range []string{"times in one selection set", "tokens", "introspection field", "introspects", "fields", "aliases", "fragments", "directives"} {
		if strings.Contains(message, b) {
			return b
		}
	}
	return message
}

// overBounds is which bounds query breaks, by a count of its own: tokens
// by the parser, the rest by expanding each fragment once, memoized. A
// document whose fragments form a cycle or share a name is refused by
// validation whatever the counts say; for it overBounds says "unknown".
func overBounds(t *testing.T, query string) []string {
	t.Helper()
	if _, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, MaxDocumentTokens); err != nil {
		if strings.Contains(err.Error(), "token limit") {
			return []string{"tokens"}
		}
		return nil // does not parse: the executor's own answer
	}
	doc, _ := parser.ParseQuery(&ast.Source{Input: query})
	r := referenceCount{doc: doc, memo: map[string]*documentShape{}, onStack: map[string]bool{}}
	for i, f := range doc.Fragments {
		for _, g := range doc.Fragments[:i] {
			if g.Name == f.Name {
				return []string{"unknown"}
			}
		}
	}
	var total documentShape
	total.Fragments = len(doc.Fragments)
	reached := map[string]bool{}
	for _, op := range doc.Operations {
		total.Directives += len(op.Directives)
		for _, v := range op.VariableDefinitions {
			total.Directives += len(v.Directives)
		}
		total = plus(total, r.set(op.SelectionSet))
		r.reach(op.SelectionSet, reached)
	}
	for _, f := range doc.Fragments {
		if !reached[f.Name] {
			total = plus(total, r.fragment(f))
		}
	}
	if r.cycle {
		return []string{"unknown"}
	}
	// The repeats at each response path, every fragment spread in place:
	// unknown past a budget, where the field bound breaks long before.
	if total.Fields > 20*MaxDocumentFields {
		return []string{"unknown"}
	}
	paths := map[string]int{}
	for i, op := range doc.Operations {
		r.paths(op.SelectionSet, fmt.Sprint(i), paths)
	}
	for _, f := range doc.Fragments {
		if !reached[f.Name] {
			r.paths(f.SelectionSet, "fragment "+f.Name, paths)
		}
	}
	for _, n := range paths {
		total.Repeats = max(total.Repeats, n)
	}
	var over []string
	if total.Introspections > 0 && total.Aliases > MaxIntrospectionAliases {
		over = append(over, "introspects")
	}
	for _, b := range []struct {
		name       string
		got, bound int
	}{
		{"fields", total.Fields, MaxDocumentFields},
		{"times in one selection set", total.Repeats, MaxResponseNameRepeats},
		{"aliases", total.Aliases, MaxDocumentAliases},
		{"fragments", total.Fragments, MaxDocumentFragments},
		{"directives", total.Directives, MaxDocumentDirectives},
		{"introspection field", total.Introspections, MaxIntrospectionFields},
	} {
		if b.got > b.bound {
			over = append(over, b.name)
		}
	}
	return over
}

// referenceCount counts a document's shape as measureDocument defines it,
// by other means: each fragment's counts computed once and added at each
// spread, and the repeats from every response path, spread out whole.
type referenceCount struct {
	doc     *ast.QueryDocument
	memo    map[string]*documentShape
	onStack map[string]bool
	cycle   bool
}

func plus(a, b documentShape) documentShape {
	return documentShape{Fields: a.Fields + b.Fields, Aliases: a.Aliases + b.Aliases,
		Fragments: a.Fragments + b.Fragments, Directives: a.Directives + b.Directives,
		Introspections: a.Introspections + b.Introspections}
}

// set is what walking set adds, fragments spread in place.
func (r *referenceCount) set(set ast.SelectionSet) documentShape {
	var s documentShape
	for _, sel := range set {
		switch x := sel.(type) {
		case *ast.Field:
			s.Fields++
			if x.Name == "__schema" || x.Name == "__type" {
				s.Introspections++
			}
			if x.Alias != x.Name {
				s.Aliases++
			}
			s.Directives += len(x.Directives)
			if len(x.SelectionSet) > 0 {
				s = plus(s, r.set(x.SelectionSet))
			}
		case *ast.InlineFragment:
			s.Fragments++
			s.Directives += len(x.Directives)
			s = plus(s, r.set(x.SelectionSet))
		case *ast.FragmentSpread:
			s.Fragments++
			s.Directives += len(x.Directives)
			if f := r.doc.Fragments.ForName(x.Name); f != nil {
				s = plus(s, r.fragment(f))
			}
		}
	}
	return s
}

func (r *referenceCount) fragment(f *ast.FragmentDefinition) documentShape {
	if r.onStack[f.Name] {
		r.cycle = true
		return documentShape{}
	}
	if m := r.memo[f.Name]; m != nil {
		return *m
	}
	r.onStack[f.Name] = true
	s := r.set(f.SelectionSet)
	s.Directives += len(f.Directives)
	delete(r.onStack, f.Name)
	r.memo[f.Name] = &s
	return s
}

// paths counts the fields set selects at each response path under at.
func (r *referenceCount) paths(set ast.SelectionSet, at string, into map[string]int) {
	for _, sel := range set {
		switch x := sel.(type) {
		case *ast.Field:
			into[at+"."+x.Alias]++
			r.paths(x.SelectionSet, at+"."+x.Alias, into)
		case *ast.InlineFragment:
			r.paths(x.SelectionSet, at, into)
		case *ast.FragmentSpread:
			if f := r.doc.Fragments.ForName(x.Name); f != nil {
				r.paths(f.SelectionSet, at, into)
			}
		}
	}
}

// reach marks the fragments set reaches.
func (r *referenceCount) reach(set ast.SelectionSet, reached map[string]bool) {
	for _, sel := range set {
		switch x := sel.(type) {
		case *ast.Field:
			r.reach(x.SelectionSet, reached)
		case *ast.InlineFragment:
			r.reach(x.SelectionSet, reached)
		case *ast.FragmentSpread:
			if f := r.doc.Fragments.ForName(x.Name); f != nil && !reached[x.Name] {
				reached[x.Name] = true
				r.reach(f.SelectionSet, reached)
			}
		}
	}
}

// schemaFields are the fields the generator selects, by type: the name, an
// argument if it takes one, and the type of its selection ("" for a leaf).
var schemaFields = map[string][]struct{ name, arg, of string }{
	"Query": {{"__typename", "", ""}, {"chargeStatus", "idempotencyKey", "ChargeCardPayload"},
		{"refundStatus", "idempotencyKey", "RefundPayload"}, {"__type", "name", "__Type"}, {"__schema", "", "__Schema"}},
	"Subscription":      {{"chargeUpdated", "idempotencyKey", "ChargeCardPayload"}},
	"ChargeCardPayload": {{"status", "", ""}, {"replayed", "", ""}, {"idempotencyKey", "", ""}, {"charge", "", "Charge"}, {"failure", "", "ChargeFailure"}},
	"RefundPayload":     {{"status", "", ""}, {"refund", "", "Refund"}},
	"Charge":            {{"id", "", ""}, {"amount", "", ""}, {"currency", "", ""}, {"refunds", "", "Refund"}},
	"Refund":            {{"id", "", ""}, {"amount", "", ""}, {"status", "", ""}},
	"ChargeFailure":     {{"code", "", ""}, {"message", "", ""}},
	"__Schema":          {{"description", "", ""}, {"types", "", "__Type"}, {"queryType", "", "__Type"}},
	"__Type":            {{"name", "", ""}, {"kind", "", ""}, {"fields", "", "__Field"}, {"ofType", "", "__Type"}},
	"__Field":           {{"name", "", ""}, {"type", "", "__Type"}, {"args", "", "__InputValue"}},
	"__InputValue":      {{"name", "", ""}, {"type", "", "__Type"}},
}

// generateDocument writes a document from b: each byte chooses the next
// thing (a field, an alias, an argument's value, a directive, an inline
// fragment, a spread, how many times to repeat a selection), mostly valid
// against the schema, so that the bounds and validation both have work.
func generateDocument(b []byte) string {
	g := &docGen{in: b, defined: map[string]bool{}}
	var out strings.Builder
	op, root := "query", "Query"
	if g.next()%8 == 0 {
		op, root = "subscription", "Subscription"
	}
	out.WriteString(op + " { " + g.selectionSet(root, 0) + "}")
	for len(g.pending) > 0 {
		f := g.pending[0]
		g.pending = g.pending[1:]
		fmt.Fprintf(&out, " fragment %s on %s { %s}", f.name, f.on, g.selectionSet(f.on, 1))
	}
	return out.String()
}

type docGen struct {
	in      []byte
	pos     int
	written int // bytes of selections written, a bound on the document's size
	defined map[string]bool
	pending []struct{ name, on string }
}

// next is the next byte, 0 once the input is spent.
func (g *docGen) next() int {
	if g.pos >= len(g.in) {
		return 0
	}
	g.pos++
	return int(g.in[g.pos-1])
}

func (g *docGen) selectionSet(typ string, depth int) string {
	var b strings.Builder
	n := 1 + g.next()%4
	for range n {
		sel := g.selection(typ, depth)
		// A byte over 200 repeats the selection: how bounds are reached.
		times := 1
		if c := g.next(); c > 200 {
			times = (c - 200) * 4
		}
		for range times {
			// Past the body limit the edge refuses the document unread.
			if g.written += len(sel); g.written > MaxBodyBytesDefault {
				break
			}
			b.WriteString(sel)
		}
	}
	if b.Len() == 0 {
		return "__typename "
	}
	return b.String()
}

func (g *docGen) selection(typ string, depth int) string {
	switch c := g.next(); {
	case c%8 == 6 && depth < 6:
		dir := ""
		if g.next()%3 == 0 {
			dir = "@include(if: true) "
		}
		return "... on " + typ + " " + dir + "{ " + g.selectionSet(typ, depth+1) + "} "
	case c%8 == 7 && depth < 6:
		name := fmt.Sprintf("F%s%d", strings.TrimLeft(typ, "_"), g.next()%3)
		if !g.defined[name] {
			g.defined[name] = true
			g.pending = append(g.pending, struct{ name, on string }{name, typ})
		}
		return "..." + name + " "
	}
	fields := schemaFields[typ]
	f := fields[g.next()%len(fields)]
	var b strings.Builder
	if c := g.next(); c%4 == 0 {
		fmt.Fprintf(&b, "a%d: ", c%5)
	}
	b.WriteString(f.name)
	if f.arg != "" {
		fmt.Fprintf(&b, `(%s: "k%d")`, f.arg, g.next()%3)
	}
	switch g.next() % 6 {
	case 0:
		b.WriteString(" @skip(if: false)")
	case 1:
		b.WriteString(" @include(if: true) @include(if: true)")
	}
	if f.of != "" {
		if depth >= 6 {
			b.WriteString(" { __typename }")
		} else {
			b.WriteString(" { " + g.selectionSet(f.of, depth+1) + "}")
		}
	}
	return b.String() + " "
}
