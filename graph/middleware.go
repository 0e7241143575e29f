package graph

import (
	"context"
	"net/http"
	"strings"

	"chargeonce/payment"
)

type requestKey struct{}

// request holds what the HTTP layer knows and the resolvers need.
type request struct {
	apiKey string
	// headerKey is the Idempotency-Key header, "" when absent.
	headerKey    string
	hasHeaderKey bool
	badAuth      bool // an Authorization header that is not "Bearer <key>"
}

// WithRequest reads the API key and the Idempotency-Key header into the
// request context. It does not authenticate: the schema is public, and a
// resolver authenticates when it needs a merchant.
func WithRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req request
		if h := r.Header.Get("Authorization"); h != "" {
			scheme, key, ok := strings.Cut(h, " ")
			if ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(key) != "" {
				req.apiKey = strings.TrimSpace(key)
			} else {
				req.badAuth = true
			}
		}
		if values := r.Header.Values("Idempotency-Key"); len(values) > 0 {
			req.hasHeaderKey = true
			req.headerKey = unquote(strings.TrimSpace(values[0]))
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)))
	})
}

func requestFrom(ctx context.Context) request {
	req, _ := ctx.Value(requestKey{}).(request)
	return req
}

// unquote accepts the header both as the IETF draft's quoted string
// ("abc") and as a bare value (abc).
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// reconcileKey reconciles the mutation argument with the Idempotency-Key
// header: both may be sent, but they must agree.
func reconcileKey(ctx context.Context, arg string) (string, error) {
	req := requestFrom(ctx)
	if req.hasHeaderKey && req.headerKey != arg {
		return "", &payment.Error{Code: payment.EINVALID, Field: "idempotencyKey",
			Message: "the Idempotency-Key header and the idempotencyKey argument differ; send the same key in both, or only one"}
	}
	return arg, nil
}
