package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"chargeonce/graph/scalar"
	"chargeonce/payment"
)

// ExtensionCode is the extensions.code the API answers err with, "" for an
// error that is not a domain one (answered as INTERNAL_SERVER_ERROR).
func ExtensionCode(err error) string {
	var domain *payment.Error
	if errors.As(err, &domain) {
		return errorCodes[domain.Code]
	}
	return ""
}

// extensions.code of each domain error code.
var errorCodes = map[string]string{
	payment.EINVALID:         codeBadUserInput,
	payment.EKEYREUSED:       codeKeyReused,
	payment.EORDERPAID:       codeOrderPaid,
	payment.EUNAUTHENTICATED: codeUnauthenticated,
	payment.EUNAVAILABLE:     codeServiceUnavailable,
	payment.ENOTFOUND:        codeNotFound,
	payment.ELIMITED:         codeRateLimited,
	payment.ESESSIONPAID:     codeSessionPaid,
	payment.ESESSIONEXPIRED:  codeSessionExpired,
	payment.ESESSIONLOCKED:   codeSessionLocked,
	payment.EFORBIDDEN:       codeForbidden,
	payment.ECHARGENOTFOUND:  codeChargeNotFound,
	payment.EREFUNDEXCEEDS:   codeRefundExceeds,
	payment.ECAPTUREEXCEEDS:  codeCaptureExceeds,
	payment.ENOTCAPTURABLE:   codeNotCapturable,
	payment.EVOIDED:          codeChargeVoided,
	payment.ECAPTURED:        codeChargeCaptured,
	payment.EAUTHEXPIRED:     codeAuthExpired,
}

// errorPresenter is the one place where errors become GraphQL errors: domain
// errors keep their message and get their extensions.code; errors about the
// request (parsing, validation, input coercion) keep gqlgen's code, except
// that a bad input value is BAD_USER_INPUT naming its field; anything else is
// logged and shown only as INTERNAL_SERVER_ERROR, so no internal detail
// leaks. Only that last kind is logged as an ERROR: a client's mistake is
// not the server's.
func errorPresenter(log *slog.Logger, production bool) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		presented := graphql.DefaultErrorPresenter(ctx, err)
		var domain *payment.Error
		if errors.As(err, &domain) && errorCodes[domain.Code] != "" {
			return presentDomain(ctx, log, presented, domain)
		}
		var notInt *scalar.NotIntegerError
		if errors.As(err, &notInt) {
			field := inputField(presented.Path)
			return &gqlerror.Error{Message: field + " " + notInt.Error(), Path: presented.Path,
				Extensions: map[string]any{"code": codeBadUserInput, "field": field}}
		}
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && gqlErr.Err == nil {
			// Raised by gqlgen itself: the message is about the request.
			presented = presentRequestError(ctx, presented, production)
			log.DebugContext(ctx, "request refused", "request_id", RequestID(ctx), "merchant", merchantName(ctx),
				"code", presented.Extensions["code"], "reason", presented.Message)
			return presented
		}
		if errors.Is(err, context.Canceled) {
			log.InfoContext(ctx, "request canceled by the client", "request_id", RequestID(ctx), "path", fmt.Sprint(presented.Path))
		} else {
			log.ErrorContext(ctx, "internal error", "request_id", RequestID(ctx), "path", fmt.Sprint(presented.Path), "err", err)
		}
		return &gqlerror.Error{
			Message:    "internal server error",
			Path:       presented.Path,
			Extensions: map[string]any{"code": codeInternal},
		}
	}
}

// merchantName names the request's merchant for a log line, "" before
// authentication: a refusal's reason may quote an idempotency key, which
// means something only within its merchant's scope.
func merchantName(ctx context.Context) string {
	if m := stateFrom(ctx).merchant; m != nil {
		return m.Name
	}
	return ""
}

func presentDomain(ctx context.Context, log *slog.Logger, presented *gqlerror.Error, domain *payment.Error) *gqlerror.Error {
	presented.Message = domain.Message
	presented.Extensions = map[string]any{"code": errorCodes[domain.Code]}
	if domain.Field != "" {
		presented.Extensions["field"] = domain.Field
	}
	if domain.Code == payment.EREFUNDEXCEEDS {
		presented.Extensions["refundable"] = domain.Refundable
	}
	if domain.Code == payment.ECAPTUREEXCEEDS {
		presented.Extensions["capturable"] = domain.Capturable
	}
	if domain.Code == payment.ELIMITED {
		presented.Extensions["retryAfterMs"] = retryAfterMs(domain.RetryAfter)
	}
	if domain.Code == payment.EUNAVAILABLE {
		presented.Extensions["retryAfterMs"] = retryAfterMs(domain.RetryAfter)
		stateFrom(ctx).answerWith(http.StatusServiceUnavailable, domain.RetryAfter)
		log.WarnContext(ctx, "database unavailable: answered SERVICE_UNAVAILABLE", "request_id", RequestID(ctx),
			"path", fmt.Sprint(presented.Path), "err", domain.Err)
	} else {
		log.DebugContext(ctx, "operation refused", "request_id", RequestID(ctx), "merchant", merchantName(ctx), "path", fmt.Sprint(presented.Path),
			"code", presented.Extensions["code"], "field", domain.Field, "reason", domain.Message)
	}
	return presented
}

// presentRequestError gives gqlgen's errors about the request a code. A bad
// value for an input (a variable, or a literal of the wrong type) is
// BAD_USER_INPUT naming the input, like the domain's own input errors.
func presentRequestError(ctx context.Context, e *gqlerror.Error, production bool) *gqlerror.Error {
	if production {
		// No hints at the schema: gqlgen turns off field suggestions, and
		// this cuts those of the other rules (arguments, types, enum values).
		if i := strings.Index(e.Message, " Did you mean"); i >= 0 {
			e.Message = e.Message[:i]
		}
	}
	if e.Extensions == nil {
		e.Extensions = map[string]any{}
	}
	var op *ast.OperationDefinition
	if graphql.HasOperationContext(ctx) {
		op = graphql.GetOperationContext(ctx).Operation
	}
	switch {
	case len(e.Path) >= 2 && e.Path[0] == ast.PathName("variable"):
		field := variableField(op, e.Path[1:])
		e.Message = field + " " + rewordCoercion(e.Message)
		e.Path = nil
		e.Extensions = map[string]any{"code": codeBadUserInput, "field": field}
	case e.Rule == "ValuesOfCorrectType" && len(e.Locations) > 0:
		// A literal of the wrong type, found by validation, before the
		// document was kept: find it again in the raw query.
		e.Extensions = map[string]any{"code": codeBadUserInput}
		if field := literalAt(graphql.GetOperationContext(ctx).RawQuery, e.Locations[0]); field != "" {
			e.Extensions["field"] = field
			if m := cannotRepresent.FindStringSubmatch(e.Message); m != nil {
				e.Message = field + " " + expected(&ast.Type{NamedType: m[1]})
			} else {
				e.Message = field + ": " + e.Message
			}
		}
	case e.Message == "introspection disabled":
		e.Extensions["code"] = codeValidationFailed
	}
	if e.Extensions["code"] == nil {
		e.Extensions["code"] = codeBadUserInput
	}
	return e
}

var (
	cannotUse       = regexp.MustCompile(`^cannot use (?:value )?\S+ as (\w+)$`)
	cannotRepresent = regexp.MustCompile(`^(\w+) cannot represent`)
)

// rewordCoercion says what a variable's value must be, without the Go terms
// of gqlparser's "cannot use string as Int".
func rewordCoercion(msg string) string {
	if m := cannotUse.FindStringSubmatch(msg); m != nil {
		return expected(&ast.Type{NamedType: m[1], NonNull: true})
	}
	return msg
}

// expected says what a value of type t must be.
func expected(t *ast.Type) string {
	if t == nil {
		return "has a value of the wrong type"
	}
	switch t.Name() {
	case "Int":
		return scalar.IntRule
	case "String", "ID":
		return "must be a string"
	case "Boolean":
		return "must be true or false"
	case "Float":
		return "must be a number"
	}
	return "must be a " + t.String()
}

// inputField names an argument's input from an error's path, which starts
// with the root field: [chargeCard input amount] is input.amount.
func inputField(path ast.Path) string {
	if len(path) > 1 {
		path = path[1:]
	}
	return pathString(path)
}

func pathString(path ast.Path) string {
	var b strings.Builder
	for _, el := range path {
		switch el := el.(type) {
		case ast.PathIndex:
			b.WriteString("[" + strconv.Itoa(int(el)) + "]")
		case ast.PathName:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(string(el))
		}
	}
	return b.String()
}

// variableField names the input a variable stands for: path is the
// variable's name and the path inside its value, and the result starts with
// the argument (and input fields) where the operation uses the variable, so
// that $in.amount passed as input is input.amount.
func variableField(op *ast.OperationDefinition, path ast.Path) string {
	name, _ := path[0].(ast.PathName)
	prefix := ast.Path{name}
	if op != nil {
		walkArguments(op.SelectionSet, func(at ast.Path, v *ast.Value) bool {
			if v.Kind == ast.Variable && v.Raw == string(name) {
				prefix = at
				return true
			}
			return false
		})
	}
	return pathString(append(append(ast.Path{}, prefix...), path[1:]...))
}

// literalAt names the argument value written at loc in query.
func literalAt(query string, loc gqlerror.Location) string {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		return ""
	}
	sets := make([]ast.SelectionSet, 0, len(doc.Operations)+len(doc.Fragments))
	for _, op := range doc.Operations {
		sets = append(sets, op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		sets = append(sets, f.SelectionSet)
	}
	var field string
	for _, set := range sets {
		walkArguments(set, func(at ast.Path, v *ast.Value) bool {
			if v.Position != nil && v.Position.Line == loc.Line && v.Position.Column == loc.Column {
				field = pathString(at)
				return true
			}
			return false
		})
	}
	return field
}

// walkArguments calls fn with every argument value in set, and the values
// inside them, each with its path from the argument's name, until fn says stop.
func walkArguments(set ast.SelectionSet, fn func(ast.Path, *ast.Value) bool) bool {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			for _, arg := range s.Arguments {
				if walkValue(ast.Path{ast.PathName(arg.Name)}, arg.Value, fn) {
					return true
				}
			}
			if walkArguments(s.SelectionSet, fn) {
				return true
			}
		case *ast.InlineFragment:
			if walkArguments(s.SelectionSet, fn) {
				return true
			}
		case *ast.FragmentSpread:
			if s.Definition != nil && walkArguments(s.Definition.SelectionSet, fn) {
				return true
			}
		}
	}
	return false
}

func walkValue(at ast.Path, v *ast.Value, fn func(ast.Path, *ast.Value) bool) bool {
	if v == nil {
		return false
	}
	if fn(at, v) {
		return true
	}
	for i, child := range v.Children {
		el := ast.PathElement(ast.PathName(child.Name))
		if v.Kind == ast.ListValue {
			el = ast.PathIndex(i)
		}
		if walkValue(append(append(ast.Path{}, at...), el), child.Value, fn) {
			return true
		}
	}
	return false
}
