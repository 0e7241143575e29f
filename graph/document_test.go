package graph

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// legitimateDocuments are the documents chargeonce's own clients send, read
// from their sources, so that a client whose document grows past a bound
// fails this package's tests: the clients' operations (client/operations.graphql,
// which the JavaScript client, the Go client and the demo send, each with
// the fragments it spreads), the Go client's own, and the playground's (its
// first query, a template string, and GraphiQL's introspection query).
func legitimateDocuments(t testing.TB) map[string]string {
	t.Helper()
	docs := map[string]string{}
	// genqlient sends each operation with the fragments it spreads.
	var defs ast.QueryDocument
	for _, file := range []string{"client/operations.graphql", "internal/apiclient/operations.graphql"} {
		src := readRepoFile(t, file)
		doc, err := parser.ParseQuery(&ast.Source{Name: file, Input: src})
		require.NoError(t, err, file)
		defs.Operations = append(defs.Operations, doc.Operations...)
		defs.Fragments = append(defs.Fragments, doc.Fragments...)
	}
	for _, op := range defs.Operations {
		text := definitionText(op.Position)
		for _, f := range spreadFragments(&defs, op.SelectionSet, nil) {
			text += "\n" + definitionText(f.Position)
		}
		docs["graphql "+op.Name] = text
	}
	// The playground's first query is a template string.
	for _, file := range []string{"web-demo/src/playground-config.ts"} {
		found := 0
		for name, text := range templateStrings(t, file) {
			if doc, err := parser.ParseQuery(&ast.Source{Input: text}); err == nil && len(doc.Operations) > 0 {
				docs[file+" "+name] = text
				found++
			}
		}
		require.Positive(t, found, "%s has a document", file)
	}
	docs["introspection"] = readRepoFile(t, "graph/testdata/documents/introspection.graphql")
	return docs
}

func readRepoFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(path)))
	require.NoError(t, err)
	return string(b)
}

// templateString is a TypeScript constant or property whose value is a
// template string.
var templateString = regexp.MustCompile("(?s)(\\w+)\\s*[=:]\\s*`([^`]*)`")

func templateStrings(t testing.TB, file string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range templateString.FindAllStringSubmatch(readRepoFile(t, file), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// spreadFragments are the fragments set spreads, and those they spread.
func spreadFragments(doc *ast.QueryDocument, set ast.SelectionSet, seen []*ast.FragmentDefinition) []*ast.FragmentDefinition {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			seen = spreadFragments(doc, s.SelectionSet, seen)
		case *ast.InlineFragment:
			seen = spreadFragments(doc, s.SelectionSet, seen)
		case *ast.FragmentSpread:
			if f := doc.Fragments.ForName(s.Name); f != nil && !slices.Contains(seen, f) {
				seen = spreadFragments(doc, f.SelectionSet, append(seen, f))
			}
		}
	}
	return seen
}

// definitionText is the text of the definition at pos: up to the closing
// brace of its selection set.
func definitionText(pos *ast.Position) string {
	src := pos.Src.Input
	depth := 0
	for i := pos.Start; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return src[pos.Start : i+1]
			}
		case '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		}
	}
	return src[pos.Start:]
}

// parserTokens is how many tokens the parser reads to parse query: the
// least token limit it parses under.
func parserTokens(t testing.TB, query string) int {
	t.Helper()
	_, err := parser.ParseQuery(&ast.Source{Input: query})
	require.NoError(t, err)
	lo, hi := 1, 1<<20
	for lo < hi {
		mid := (lo + hi) / 2
		if _, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, mid); err == nil {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// unbounded measures a document whole.
var unbounded = documentShape{Fields: 1 << 30, Repeats: 1 << 30, Aliases: 1 << 30, Fragments: 1 << 30, Directives: 1 << 30,
	Introspections: 1 << 30, IntrospectionAliases: 1 << 30}

func shapeOf(t testing.TB, query string) documentShape {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	require.NoError(t, err)
	shape, exceeded := measureDocument(doc, unbounded)
	require.Empty(t, exceeded)
	return shape
}

func TestDocumentLimits_LegitimateDocumentsPass(t *testing.T) {
	t.Parallel()
	docs := legitimateDocuments(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range docs {
			if !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		query := docs[name]
		s := shapeOf(t, query)
		t.Logf("%-55s tokens %4d fields %4d repeats %d aliases %d fragments %3d directives %d",
			name, parserTokens(t, query), s.Fields, s.Repeats, s.Aliases, s.Fragments, s.Directives)
		require.Nil(t, checkDocument(query), name)
	}
}

func TestDocumentLimits_BenchmarkDocumentsAreWhatTheySay(t *testing.T) {
	t.Parallel()
	for _, d := range hostileDocuments(MaxBodyBytesDefault) {
		size := requestSize(withNonce(d.query, 99999999))
		require.LessOrEqual(t, size, MaxBodyBytesDefault, d.name)
		require.Greater(t, size, MaxBodyBytesDefault-8<<10, "%s: at the body limit, within one of its parts", d.name)
		err := checkDocument(d.query)
		require.NotNil(t, err, d.name)
		require.Equal(t, codeComplexityLimit, err.Extensions["code"], d.name)
	}
	for _, d := range sameNameTrees() {
		err := checkDocument(d.query)
		require.NotNil(t, err, d.name)
		require.Contains(t, err.Message, "times in one selection set", d.name)
	}
	for _, d := range worstAccepted() {
		s := shapeOf(t, d.query)
		t.Logf("%-70s tokens %4d fields %4d repeats %d aliases %3d fragments %3d directives %d",
			d.name, parserTokens(t, d.query), s.Fields, s.Repeats, s.Aliases, s.Fragments, s.Directives)
		require.Nil(t, checkDocument(d.query), d.name)
	}
}

func TestMeasureDocument_CountsAsValidationWalks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		query string
		want  documentShape
	}{
		{"a field and its selection", `{ a { b c } }`, documentShape{Fields: 3, Repeats: 1}},
		{"one name in two sets is no repeat", `{ a { x } b { x } }`, documentShape{Fields: 4, Repeats: 1}},
		{"repeats in one set", `{ a a a }`, documentShape{Fields: 3, Repeats: 3}},
		{"same-named fields merge their selections", `{ a { x } a { x y } }`, documentShape{Fields: 5, Repeats: 2}},
		{"operations do not merge", `query A { a { x } } query B { a { x } }`, documentShape{Fields: 4, Repeats: 1}},
		{"repeats through an inline fragment", `{ a ... on Q { a } }`, documentShape{Fields: 2, Repeats: 2, Fragments: 1}},
		{"repeats through a spread", `{ a ...F } fragment F on Q { a }`, documentShape{Fields: 2, Repeats: 2, Fragments: 2}},
		{"an alias is its response name", `{ a: x a: y b: x }`, documentShape{Fields: 3, Repeats: 2, Aliases: 3}},
		{"a name given as its own alias is no alias", `{ x: x }`, documentShape{Fields: 1, Repeats: 1}},
		{"a fragment's fields count at each spread", `{ x { ...F } y { ...F } } fragment F on T { a b }`,
			documentShape{Fields: 6, Repeats: 1, Fragments: 3}},
		{"a chain of fragments", `{ ...A } fragment A on Q { a ...B } fragment B on Q { b ...C } fragment C on Q { c }`,
			documentShape{Fields: 3, Repeats: 1, Fragments: 6}},
		{"a cycle stops at the fragment it reaches again", `{ ...F } fragment F on Q { a ...F }`,
			documentShape{Fields: 1, Repeats: 1, Fragments: 3}},
		{"an unused fragment is walked too", `{ a } fragment U on Q { b c }`, documentShape{Fields: 3, Repeats: 1, Fragments: 1}},
		{"an unknown fragment counts its spread", `{ a ...Nowhere }`, documentShape{Fields: 1, Repeats: 1, Fragments: 1}},
		{"every operation", `query A { a } query B { a b }`, documentShape{Fields: 3, Repeats: 1}},
		{"directives everywhere", `query Q($v: Int @d) @d { a @d ...F @d ... @d { b } } fragment F on Q @d { c }`,
			documentShape{Fields: 3, Repeats: 1, Fragments: 3, Directives: 6}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, shapeOf(t, tt.query), tt.name)
	}
}

func TestMeasureDocument_AtEachBoundAndOnePast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		bounds     documentShape
		at, past   string
		wantInText string
	}{
		{"fields", documentShape{Fields: 4}, `{ a { b } c d }`, `{ a { b } c d e }`, "more than 4 fields"},
		{"fields through spreads", documentShape{Fields: 5}, `{ x { ...F } y { ...F } z } fragment F on T { a }`,
			`{ x { ...F } y { ...F } } fragment F on T { a b }`, "more than 5 fields"},
		{"repeats", documentShape{Repeats: 2}, `{ a a b }`, `{ a a a }`, "more than 2 times"},
		{"repeats through fragments", documentShape{Repeats: 2}, `{ a ...F } fragment F on Q { a b }`,
			`{ a ... on Q { a } ...F } fragment F on Q { a }`, "more than 2 times"},
		{"repeats in merged selections", documentShape{Repeats: 2}, `{ a { x } a { x } }`, `{ a { x x } a { x } }`, "more than 2 times"},
		{"repeats in merged selections through fragments", documentShape{Repeats: 2}, `{ a { ...F } a { x } } fragment F on T { x }`,
			`{ a { ...F } ... { a { x } } } fragment F on T { x x }`, "more than 2 times"},
		{"aliases", documentShape{Aliases: 2}, `{ a: x b: x c }`, `{ a: x b: x c: x }`, "more than 2 aliases"},
		{"fragments", documentShape{Fragments: 3}, `{ ...F ... { a } } fragment F on Q { b }`,
			`{ ...F ... { a } ... { c } } fragment F on Q { b }`, "more than 3 fragments"},
		{"spreads through a chain", documentShape{Fragments: 4}, `{ ...A } fragment A on Q { ...B } fragment B on Q { a }`,
			`{ ...A ...B } fragment A on Q { ...B } fragment B on Q { a }`, "more than 4 fragments"},
		{"directives", documentShape{Directives: 2}, `{ a @d ... @d { b } }`, `{ a @d ... @d { b @d } }`, "more than 2 directives"},
	}
	for _, tt := range tests {
		bounds := unbounded
		switch {
		case tt.bounds.Fields > 0:
			bounds.Fields = tt.bounds.Fields
		case tt.bounds.Repeats > 0:
			bounds.Repeats = tt.bounds.Repeats
		case tt.bounds.Aliases > 0:
			bounds.Aliases = tt.bounds.Aliases
		case tt.bounds.Fragments > 0:
			bounds.Fragments = tt.bounds.Fragments
		case tt.bounds.Directives > 0:
			bounds.Directives = tt.bounds.Directives
		}
		for query, refused := range map[string]bool{tt.at: false, tt.past: true} {
			doc, err := parser.ParseQuery(&ast.Source{Input: query})
			require.NoError(t, err)
			_, exceeded := measureDocument(doc, bounds)
			if !refused {
				require.Empty(t, exceeded, "%s: %s is at the bound", tt.name, query)
				continue
			}
			require.Contains(t, exceeded, tt.wantInText, "%s: %s is past the bound", tt.name, query)
		}
	}
}

// TestCheckDocument_HoldsEachBound builds, for each exported bound, a
// document at it and one past it: the first passes, the second is refused
// with COMPLEXITY_LIMIT_EXCEEDED and a message that names the bound and
// quotes nothing of the document.
func TestCheckDocument_HoldsEachBound(t *testing.T) {
	t.Parallel()
	times := func(n int, s func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(s(i))
		}
		return b.String()
	}
	// Fields: four spreads of a chain of ofType, under __type and beside
	// three more fields (4 + 4 × 124 = 500).
	chain := func(fields int) string {
		return " fragment C on __Type { " + strings.Repeat("ofType { ", fields-1) + "name" + strings.Repeat(" }", fields)
	}
	fieldsDoc := func(extra string) string {
		return `{ __typename __type(name: "Query") { name kind ` + extra + `...C ...C ...C ...C } }` + chain(124)
	}
	// Tokens: comments count, one token a line.
	tokensDoc := func(n int) string {
		base := "{ __typename }"
		return base + strings.Repeat("\n#", n-parserTokens(t, base))
	}
	tests := []struct {
		name     string
		bound    int
		at, past string
		message  string
	}{
		{"tokens", MaxDocumentTokens, tokensDoc(MaxDocumentTokens), tokensDoc(MaxDocumentTokens + 1), "tokens"},
		{"fields", MaxDocumentFields, fieldsDoc(""), fieldsDoc("description "), "fields"},
		{"repeats", MaxResponseNameRepeats, "{ " + strings.Repeat("__typename ", MaxResponseNameRepeats) + "}",
			"{ " + strings.Repeat("__typename ", MaxResponseNameRepeats+1) + "}", "times in one selection set"},
		{"aliases", MaxDocumentAliases, "{ " + times(MaxDocumentAliases, func(i int) string { return fmt.Sprintf("a%d: __typename ", i) }) + "}",
			"{ " + times(MaxDocumentAliases+1, func(i int) string { return fmt.Sprintf("a%d: __typename ", i) }) + "}", "aliases"},
		{"fragments", MaxDocumentFragments, "{ " + strings.Repeat("... { ", MaxDocumentFragments) + "__typename" + strings.Repeat(" }", MaxDocumentFragments) + " }",
			"{ " + strings.Repeat("... { ", MaxDocumentFragments+1) + "__typename" + strings.Repeat(" }", MaxDocumentFragments+1) + " }", "fragments"},
		{"directives", MaxDocumentDirectives, "{ __typename" + strings.Repeat(" @include(if: true)", MaxDocumentDirectives) + " }",
			"{ __typename" + strings.Repeat(" @include(if: true)", MaxDocumentDirectives+1) + " }", "directives"},
		{"introspection fields", MaxIntrospectionFields, "{ s: __schema { description } }",
			`{ s: __schema { description } t: __type(name: "Query") { name } }`, "introspection field"},
		{"aliases of an introspection", MaxIntrospectionAliases, "{ s: __schema { types { name } } __typename }",
			"{ s: __schema { t: types { name } } __typename }", "introspects the schema"},
	}
	for _, tt := range tests {
		require.Nil(t, checkDocument(tt.at), "%s: at the bound", tt.name)
		err := checkDocument(tt.past)
		require.NotNil(t, err, "%s: past the bound", tt.name)
		require.Equal(t, codeComplexityLimit, err.Extensions["code"], tt.name)
		require.Contains(t, err.Message, fmt.Sprintf("more than %d ", tt.bound), tt.name)
		require.Contains(t, err.Message, tt.message, tt.name)
		for _, quoted := range []string{"__typename", "__type", "ofType", "include", "a100"} {
			require.NotContains(t, err.Message, quoted, "%s: the message quotes nothing of the document", tt.name)
		}
	}
}

func TestCheckDocument_ParseErrorsAreTheExecutors(t *testing.T) {
	t.Parallel()
	err := checkDocument("mutation {")
	require.NotNil(t, err)
	require.Equal(t, "GRAPHQL_PARSE_FAILED", err.Extensions["code"])
	_, parseErr := parser.ParseQuery(&ast.Source{Input: "mutation {"})
	require.Equal(t, parseErr.Error(), err.Error(), "the same answer as without the check")
}
