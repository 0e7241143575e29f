package graph

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"chargeonce/graph/generated"
	"chargeonce/metrics"
	"chargeonce/ratelimit"
)

// Defaults of HandlerConfig, the one place they are written.
const (
	MaxBodyBytesDefault         = 64 << 10
	MaxChargesPerRequestDefault = 1
	AuthTimeoutDefault          = 5 * time.Second
)

// HandlerConfig configures the GraphQL endpoint. Zero values take the defaults.
type HandlerConfig struct {
	// Production turns introspection and field suggestions ("Did you
	// mean …") off; development keeps them for the playground.
	Production bool
	// MaxBodyBytes bounds a request body; a larger one is REQUEST_TOO_LARGE.
	MaxBodyBytes int64
	// MaxChargesPerRequest bounds the chargeCard fields one document may run.
	MaxChargesPerRequest int
	// MerchantLimit rations each merchant's requests with its secret keys,
	// IPLimit each client address's unauthenticated ones (and failed
	// authentications); nil: no limit.
	MerchantLimit, IPLimit *ratelimit.Limiter
	// PublishableLimit and PublishableIPLimit ration the requests made with
	// publishable keys, per merchant and per client address: budgets of
	// their own, so that no volume of public traffic spends the merchant's
	// server's (MerchantLimit); nil: no limit.
	PublishableLimit, PublishableIPLimit *ratelimit.Limiter
	// AuthTimeout bounds the API key lookup.
	AuthTimeout time.Duration
	// Streams holds the websockets and event streams: their caps and
	// lifetime, the re-checks of their keys (run by Streams.Run), and their
	// end when the server shuts down (Streams.Close); nil: streams with
	// the default caps, that no shutdown ends and nothing re-checks.
	Streams *Streams
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

const (
	// complexityLimit bounds the cost of one operation; the schema is small,
	// so a legitimate query stays far below it.
	complexityLimit = 200
	// depthLimit bounds nesting; the deepest legitimate query is the
	// playground's introspection query, at about 13 levels.
	depthLimit = 15
)

// NewHandler returns the /graphql endpoint: the HTTP edge in front of
// gqlgen's executor, with its transports: POST and GET for queries and
// mutations, websockets and server-sent events for the subscription.
func NewHandler(r *Resolver, cfg HandlerConfig) http.Handler {
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, MaxBodyBytesDefault)
	cfg.MaxChargesPerRequest = cmp.Or(cfg.MaxChargesPerRequest, MaxChargesPerRequestDefault)
	cfg.AuthTimeout = cmp.Or(cfg.AuthTimeout, AuthTimeoutDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Discard()
	}
	log := cfg.Logger
	if cfg.Streams == nil {
		cfg.Streams = NewStreams(StreamsConfig{Logger: log, Metrics: cfg.Metrics})
	}
	if r.Metrics == nil {
		r.Metrics = cfg.Metrics
	}
	e := &edge{
		merchants:     r.Merchants,
		maxBody:       cfg.MaxBodyBytes,
		merchantLimit: cfg.MerchantLimit,
		ipLimit:       cfg.IPLimit,
		publishable:   cfg.PublishableLimit,
		publishableIP: cfg.PublishableIPLimit,
		authTimeout:   cfg.AuthTimeout,
		streams:       cfg.Streams,
		origins:       r.Merchants,
		production:    cfg.Production,
		log:           log,
		metrics:       cfg.Metrics,
	}
	cfg.Streams.serve(e.recheckStream)
	srv := handler.New(generated.NewExecutableSchema(generated.Config{Resolvers: r,
		Directives: generated.DirectiveRoot{SecretKeyOnly: secretKeyOnly}}))
	srv.AddTransport(transport.Options{})
	// The streams first: gqlgen serves a request with the first transport
	// that supports it, and an event stream is a POST too.
	srv.AddTransport(e.websocketTransport())
	srv.AddTransport(sseTransport{sse: transport.SSE{KeepAlivePingInterval: sseKeepAlive}})
	srv.AddTransport(getTransport{})
	srv.AddTransport(postTransport{answers: newStoredAnswers(r.Payments, cfg.Metrics)})
	// The documents that passed validation; documentLimits lets them by.
	validated := lru.New[*ast.QueryDocument](1000)
	srv.SetQueryCache(validated)
	srv.SetParserTokenLimit(MaxDocumentTokens)
	if !cfg.Production {
		srv.Use(extension.Introspection{})
	}
	srv.SetDisableSuggestion(cfg.Production)
	if cfg.Production {
		srv.SetValidationRulesFn(rulesWithoutSuggestions)
	}
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	// Before parsing and validation, and after the persisted query, which
	// puts the document in place of its hash.
	srv.Use(documentLimits{validated: validated})
	// Before the complexity limit, so that a flood of chargeCard aliases is
	// refused for what it is.
	srv.Use(operationLimits{maxCharges: cfg.MaxChargesPerRequest, maxDepth: depthLimit, introspection: !cfg.Production})
	srv.Use(extension.FixedComplexityLimit(complexityLimit))
	srv.Use(streamOperations{e})
	srv.SetErrorPresenter(errorPresenter(log, cfg.Production))
	srv.SetRecoverFunc(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in resolver", "request_id", RequestID(ctx), "panic", p)
		return errors.New("internal server error")
	})
	e.next = srv
	return e
}

// rulesWithoutSuggestions are the validation rules with none that answers
// "Did you mean …". SetDisableSuggestion only covers fields and selections;
// misspelled arguments, input fields and fragment types would still be
// answered with the names that introspection hides. The rules keep their
// names, which the error presenter reads (ValuesOfCorrectType).
func rulesWithoutSuggestions() *rules.Rules {
	r := rules.NewDefaultRules()
	r.ReplaceRule(rules.KnownArgumentNamesRule.Name, rules.KnownArgumentNamesRuleWithoutSuggestions.RuleFunc)
	r.ReplaceRule(rules.KnownTypeNamesRule.Name, rules.KnownTypeNamesRuleWithoutSuggestions.RuleFunc)
	r.ReplaceRule(rules.ValuesOfCorrectTypeRule.Name, rules.ValuesOfCorrectTypeRuleWithoutSuggestions.RuleFunc)
	return r
}
