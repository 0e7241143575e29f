package graph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/payment"
)

func TestErrorPresenter(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	present := errorPresenter(slog.New(slog.NewTextHandler(&logs, nil)), false)
	ctx := context.Background()

	internal := present(ctx, fmt.Errorf("store: %w", errors.New(`dial tcp 10.1.2.3:5432: password "hunter2" rejected`)))
	require.Equal(t, "internal server error", internal.Message)
	require.Equal(t, "INTERNAL_SERVER_ERROR", internal.Extensions["code"])
	require.NotContains(t, fmt.Sprint(internal), "hunter2", "internal details never reach the client")
	require.Contains(t, logs.String(), "dial tcp", "but they are logged")

	for code, want := range map[string]string{
		payment.EINVALID:         "BAD_USER_INPUT",
		payment.EKEYREUSED:       "IDEMPOTENCY_KEY_REUSED",
		payment.EUNAUTHENTICATED: "UNAUTHENTICATED",
	} {
		e := present(ctx, fmt.Errorf("wrapped: %w", &payment.Error{Code: code, Message: "msg", Field: "input.amount"}))
		require.Equal(t, want, e.Extensions["code"])
		require.Equal(t, "msg", e.Message)
		require.Equal(t, "input.amount", e.Extensions["field"])
	}

	unavailable := present(ctx, &payment.Error{Code: payment.EUNAVAILABLE, Message: "the payment database is unavailable",
		RetryAfter: 1500 * time.Millisecond, Err: errors.New("dial tcp 10.1.2.3:5432: connection refused")})
	require.Equal(t, "SERVICE_UNAVAILABLE", unavailable.Extensions["code"])
	require.Equal(t, 1500, unavailable.Extensions["retryAfterMs"])
	require.NotContains(t, unavailable.Message, "10.1.2.3")
	require.NotContains(t, logs.String(), "level=ERROR msg=\"database unavailable", "an outage is a warning, not an error")
}
