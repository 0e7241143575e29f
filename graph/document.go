package graph

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// The bounds of a document, checked before gqlgen validates it. Validation
// is not linear in a document's size: the overlapping-fields rule compares
// every pair of fields that share a response name, and every rule walks a
// fragment again from each operation and fragment that reaches it. A
// stranger's 64 KiB of `{__typename __typename …}` cost seconds of CPU
// before any key was checked. Bounded by these, the worst document costs
// about what a normal chargeCard costs (document_bench_test.go).
//
// Each is well above what the legitimate documents need. Measured by
// TestDocumentLimits_LegitimateDocumentsPass, which reads them from their
// sources and fails when one outgrows a bound:
//
//	                                      tokens fields repeats aliases fragments directives
//	ChargeCard, Go client (its fragment)      65     20       1       0         2          0
//	ChargeCard, JavaScript client             54     20       1       0         0          0
//	every other client and demo document    ≤ 65   ≤ 20       1       0       ≤ 2          0
//	GraphiQL's introspection query           187    230       1       0        13          0
//	  (graphql-js 16's getIntrospectionQuery with every option on)
//
// No client aliases a field. An alias flood of 100 chargeCard fields
// (2,403 tokens, 100 aliases) still reaches the one-charge rule
// (operationLimits), which answers it by name. These are constants, not settings: they bound the shape of a
// document against this schema, not an operator's traffic.
const (
	// MaxDocumentTokens bounds the tokens the parser reads, comments
	// included: gqlgen's parser token limit too.
	MaxDocumentTokens = 3000
	// MaxDocumentFields bounds the fields of a document, a fragment's
	// counted at each spread, so that fragments spreading one another
	// cannot multiply what validation and the executor walk.
	MaxDocumentFields = 500
	// MaxResponseNameRepeats bounds how often one response name may be
	// selected in one selection set, counting the fields its inline
	// fragments and fragment spreads bring, and the selections of fields
	// of the same name, which merge: the fields at one path of the
	// response, which the overlapping-fields rule compares pair by pair.
	// Bounded, it compares a few pairs a field; a tree of same-named
	// fields within the other bounds made it compare 35,000.
	MaxResponseNameRepeats = 4
	// MaxDocumentAliases bounds the aliased fields of a document.
	MaxDocumentAliases = 100
	// MaxDocumentFragments bounds fragment definitions, spreads and inline
	// fragments, a spread counted each time its fragment is reached.
	MaxDocumentFragments = 100
	// MaxDocumentDirectives bounds the directives of a document.
	MaxDocumentDirectives = 50
	// MaxIntrospectionFields bounds the __schema and __type fields of a
	// document (each spread counted), and MaxIntrospectionAliases the
	// aliases of a document that has one: the complexity limit does not
	// price how much of the schema an introspection field lists, so 50
	// aliased __schema fields cost 34 charges of CPU, where GraphiQL's one
	// unaliased query costs 4. (Production refuses introspection anyway.)
	MaxIntrospectionFields  = 1
	MaxIntrospectionAliases = 1
)

// documentLimits refuses, before the executor parses and validates it, a
// document over the bounds above. A document already in the executor's
// query cache passed validation before: it is not checked again, so the
// fixed documents of charges and replays cost what they did.
type documentLimits struct {
	validated graphql.Cache[*ast.QueryDocument]
}

var (
	_ graphql.HandlerExtension          = documentLimits{}
	_ graphql.OperationParameterMutator = documentLimits{}
)

func (documentLimits) ExtensionName() string                          { return "DocumentLimits" }
func (documentLimits) Validate(schema graphql.ExecutableSchema) error { return nil }

func (l documentLimits) MutateOperationParameters(ctx context.Context, params *graphql.RawParams) *gqlerror.Error {
	if _, ok := l.validated.Get(ctx, params.Query); ok {
		return nil
	}
	return checkDocument(params.Query)
}

// checkDocument parses query and refuses it when it is over a bound. A
// document that does not parse gets the executor's own answer.
func checkDocument(query string) *gqlerror.Error {
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, MaxDocumentTokens)
	if err != nil {
		if gqlErr, ok := err.(*gqlerror.Error); ok {
			if strings.HasPrefix(gqlErr.Message, "exceeded token limit") {
				return documentError(fmt.Sprintf("the document has more than %d tokens", MaxDocumentTokens))
			}
			errcode.Set(gqlErr, errcode.ParseFailed)
			return gqlErr
		}
		return documentError("the document could not be read")
	}
	if _, exceeded := measureDocument(doc, documentBounds); exceeded != "" {
		return documentError(exceeded)
	}
	return nil
}

func documentError(what string) *gqlerror.Error {
	return limitError(codeComplexityLimit, what+"; nothing was run. Send a smaller document")
}

// codeComplexityLimit is gqlgen's code for an operation over its
// complexity limit, the one a client already knows for "too big".
const codeComplexityLimit = "COMPLEXITY_LIMIT_EXCEEDED"

// documentShape is what measureDocument counts; as bounds,
// IntrospectionAliases bounds Aliases in a document with Introspections
// (measured, it stays 0).
type documentShape struct {
	Fields, Repeats, Aliases, Fragments, Directives, Introspections int
	IntrospectionAliases                                            int
}

// documentBounds are the bounds the check holds documents to.
var documentBounds = documentShape{
	Fields:               MaxDocumentFields,
	Repeats:              MaxResponseNameRepeats,
	Aliases:              MaxDocumentAliases,
	Fragments:            MaxDocumentFragments,
	Directives:           MaxDocumentDirectives,
	Introspections:       MaxIntrospectionFields,
	IntrospectionAliases: MaxIntrospectionAliases,
}

// measureDocument walks doc as validation will, counts its shape, and says
// which bound it breaks ("" if none). It walks each operation with its
// fragments spread in place, then each fragment definition no operation
// reached; it stops at the first bound broken, so that a document costs at
// most the bounds to walk.
func measureDocument(doc *ast.QueryDocument, bounds documentShape) (documentShape, string) {
	w := documentWalk{bounds: bounds, byName: make(map[string]*ast.FragmentDefinition, len(doc.Fragments)),
		reached: map[string]bool{}, spreading: map[string]bool{}, paths: map[string]int{}}
	w.add(&w.shape.Fragments, len(doc.Fragments))
	for _, f := range doc.Fragments {
		if _, ok := w.byName[f.Name]; !ok {
			w.byName[f.Name] = f
		}
	}
	for i, op := range doc.Operations {
		w.directives(op.Directives)
		for _, v := range op.VariableDefinitions {
			w.directives(v.Directives)
		}
		w.selectionSet(op.SelectionSet, strconv.Itoa(i))
	}
	// Validation walks every fragment on its own as well; one that no
	// operation reaches is walked here, once.
	var unreached []*ast.FragmentDefinition
	for _, f := range doc.Fragments {
		if w.byName[f.Name] == f && !w.reached[f.Name] {
			unreached = append(unreached, f)
		}
	}
	for _, f := range unreached {
		w.spread(f, "fragment "+f.Name)
	}
	return w.shape, w.exceeded
}

// documentWalk is one walk of measureDocument: the counts so far, and the
// first bound broken.
type documentWalk struct {
	bounds    documentShape
	shape     documentShape
	exceeded  string
	byName    map[string]*ast.FragmentDefinition
	reached   map[string]bool // fragments an operation reaches
	spreading map[string]bool // fragments on the path being walked: a cycle stops there
	paths     map[string]int  // fields selected at each response path
}

// selectionSet walks set, selected at path in the response. Its fields and
// those its fragments bring answer at path + "." + their response name;
// so do those of every other field selected at path, whose selections
// merge with set's: the overlapping-fields rule compares every two
// fields selected at one response path.
func (w *documentWalk) selectionSet(set ast.SelectionSet, path string) {
	for _, sel := range set {
		if w.exceeded != "" {
			return
		}
		switch s := sel.(type) {
		case *ast.Field:
			w.add(&w.shape.Fields, 1)
			if s.Name == "__schema" || s.Name == "__type" {
				w.add(&w.shape.Introspections, 1)
			}
			if s.Alias != s.Name {
				w.add(&w.shape.Aliases, 1)
			}
			w.directives(s.Directives)
			at := path + "." + s.Alias
			w.paths[at]++
			if n := w.paths[at]; n > w.shape.Repeats {
				w.shape.Repeats = n
				w.check()
			}
			if len(s.SelectionSet) > 0 {
				w.selectionSet(s.SelectionSet, at)
			}
		case *ast.InlineFragment:
			w.add(&w.shape.Fragments, 1)
			w.directives(s.Directives)
			w.selectionSet(s.SelectionSet, path)
		case *ast.FragmentSpread:
			w.add(&w.shape.Fragments, 1)
			w.directives(s.Directives)
			if def := w.byName[s.Name]; def != nil && !w.spreading[s.Name] {
				w.spread(def, path)
			}
		}
	}
}

// spread walks fragment def where it is spread (or on its own).
func (w *documentWalk) spread(def *ast.FragmentDefinition, path string) {
	w.reached[def.Name] = true
	w.spreading[def.Name] = true
	w.directives(def.Directives)
	w.selectionSet(def.SelectionSet, path)
	delete(w.spreading, def.Name)
}

func (w *documentWalk) directives(list ast.DirectiveList) {
	w.add(&w.shape.Directives, len(list))
}

// add adds n to one of the counts and checks the bounds.
func (w *documentWalk) add(count *int, n int) {
	if n == 0 {
		return
	}
	*count += n
	w.check()
}

// check records the first bound the counts break.
func (w *documentWalk) check() {
	if w.exceeded != "" {
		return
	}
	s, b := w.shape, w.bounds
	switch {
	case s.Fields > b.Fields:
		w.exceeded = fmt.Sprintf("the document selects more than %d fields (a fragment's fields count at each spread)", b.Fields)
	case s.Repeats > b.Repeats:
		w.exceeded = fmt.Sprintf("the document selects one response name more than %d times in one selection set (same-named fields merge theirs)", b.Repeats)
	case s.Aliases > b.Aliases:
		w.exceeded = fmt.Sprintf("the document has more than %d aliases", b.Aliases)
	case s.Fragments > b.Fragments:
		w.exceeded = fmt.Sprintf("the document has more than %d fragments (definitions, spreads and inline fragments)", b.Fragments)
	case s.Directives > b.Directives:
		w.exceeded = fmt.Sprintf("the document has more than %d directives", b.Directives)
	case s.Introspections > b.Introspections:
		w.exceeded = fmt.Sprintf("the document has more than %d introspection field (of the schema or of a type)", b.Introspections)
	case s.Introspections > 0 && s.Aliases > b.IntrospectionAliases:
		w.exceeded = fmt.Sprintf("the document introspects the schema, and may then have no more than %d alias", b.IntrospectionAliases)
	}
}
