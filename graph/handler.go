package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"chargeonce/graph/generated"
	"chargeonce/payment"
)

// HandlerConfig configures the GraphQL endpoint.
type HandlerConfig struct {
	// Introspection is on in development, for the playground.
	Introspection bool
	Logger        *slog.Logger
}

// complexityLimit bounds the cost of one operation; the schema is small, so
// a legitimate query stays far below it.
const complexityLimit = 200

// NewHandler returns the /graphql endpoint.
func NewHandler(r *Resolver, cfg HandlerConfig) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := handler.New(generated.NewExecutableSchema(generated.Config{Resolvers: r}))
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	if cfg.Introspection {
		srv.Use(extension.Introspection{})
	}
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	srv.Use(extension.FixedComplexityLimit(complexityLimit))
	srv.SetErrorPresenter(errorPresenter(log))
	srv.SetRecoverFunc(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in resolver", "panic", p)
		return errors.New("internal server error")
	})
	return WithRequest(srv)
}

// extensions.code of each domain error code.
var errorCodes = map[string]string{
	payment.EINVALID:         "BAD_USER_INPUT",
	payment.EKEYREUSED:       "IDEMPOTENCY_KEY_REUSED",
	payment.EORDERPAID:       "ORDER_ALREADY_PAID",
	payment.EUNAUTHENTICATED: "UNAUTHENTICATED",
	payment.ENOTFOUND:        "NOT_FOUND",
}

// errorPresenter is the one place where errors become GraphQL errors: domain
// errors keep their message and get their extensions.code; gqlgen's own
// errors about the request keep theirs; anything else is logged and shown
// only as INTERNAL_SERVER_ERROR, so no internal detail leaks.
func errorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		presented := graphql.DefaultErrorPresenter(ctx, err)
		var domain *payment.Error
		if errors.As(err, &domain) && errorCodes[domain.Code] != "" {
			presented.Message = domain.Message
			presented.Extensions = map[string]any{"code": errorCodes[domain.Code]}
			if domain.Field != "" {
				presented.Extensions["field"] = domain.Field
			}
			return presented
		}
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && gqlErr.Err == nil {
			// Raised by gqlgen itself (parsing, validation, input coercion):
			// the message is about the request and safe to show.
			if presented.Extensions == nil {
				presented.Extensions = map[string]any{}
			}
			if presented.Extensions["code"] == nil {
				presented.Extensions["code"] = "BAD_USER_INPUT"
			}
			return presented
		}
		log.ErrorContext(ctx, "internal error", "path", fmt.Sprint(presented.Path), "err", err)
		return &gqlerror.Error{
			Message:    "internal server error",
			Path:       presented.Path,
			Extensions: map[string]any{"code": "INTERNAL_SERVER_ERROR"},
		}
	}
}
