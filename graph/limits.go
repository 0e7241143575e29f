package graph

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// operationLimits refuses, as a whole and before anything runs, an operation
// sent over a transport that does not carry its kind, one that would charge
// more than maxCharges times, nest deeper than maxDepth, or (when
// introspection is off) ask for the schema.
type operationLimits struct {
	maxCharges    int
	maxDepth      int
	introspection bool
}

var (
	_ graphql.HandlerExtension        = operationLimits{}
	_ graphql.OperationContextMutator = operationLimits{}
)

func (operationLimits) ExtensionName() string                          { return "OperationLimits" }
func (operationLimits) Validate(schema graphql.ExecutableSchema) error { return nil }

func (l operationLimits) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	op := oc.Operation
	// Each kind of operation has its transports. Charges go over POST only,
	// where the edge reads the Idempotency-Key header and rations each
	// request; a stream carries the subscription, which POST cannot.
	st := stateFrom(ctx)
	streaming := st.stream != notStream
	if streaming {
		st.setOperation(op.Name, rootField(oc))
	}
	if err := checkKeyKind(st, oc); err != nil {
		return err
	}
	switch {
	case streaming && op.Operation != ast.Subscription:
		return limitError(codeBadRequest,
			"websockets and event streams carry subscriptions only; send queries and mutations (chargeCard) with POST")
	case !streaming && op.Operation == ast.Subscription:
		return limitError(codeBadRequest,
			"subscribe over a websocket (graphql-transport-ws) or an event stream (POST with Accept: text/event-stream)")
	}
	if op.Operation == ast.Mutation {
		// The fields that would run, after fragments, @skip and @include; two
		// fields under one response name run once.
		charges := 0
		for _, f := range graphql.CollectFields(oc, op.SelectionSet, []string{"Mutation"}) {
			if f.Name == "chargeCard" {
				charges++
			}
		}
		if charges > l.maxCharges {
			return limitError(codeBadUserInput, fmt.Sprintf(
				"this request would run chargeCard %d times; at most %d per request is allowed. Nothing was run: send one request per charge",
				charges, l.maxCharges))
		}
	}
	if !l.introspection && op.Operation == ast.Query {
		for _, f := range graphql.CollectFields(oc, op.SelectionSet, []string{"Query"}) {
			if f.Name == "__schema" || f.Name == "__type" {
				return limitError(codeValidationFailed, "introspection is disabled")
			}
		}
	}
	if d := depth(op.SelectionSet, 0, l.maxDepth); d > l.maxDepth {
		return limitError(codeValidationFailed, fmt.Sprintf("the operation nests deeper than %d levels", l.maxDepth))
	}
	return nil
}

func limitError(code, message string) *gqlerror.Error {
	return &gqlerror.Error{Message: message, Extensions: map[string]any{"code": code}}
}

// depth is how deep set nests fields, counting from d, and following
// fragments; it stops counting past limit (validation has already refused
// fragment cycles, but a cut-off costs nothing).
func depth(set ast.SelectionSet, d, limit int) int {
	if d > limit {
		return d
	}
	deepest := d
	for _, sel := range set {
		var sub int
		switch s := sel.(type) {
		case *ast.Field:
			sub = depth(s.SelectionSet, d+1, limit)
		case *ast.InlineFragment:
			sub = depth(s.SelectionSet, d, limit)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				sub = depth(s.Definition.SelectionSet, d, limit)
			}
		}
		deepest = max(deepest, sub)
	}
	return deepest
}
