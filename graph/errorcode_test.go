package graph

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/payment"
)

func TestErrorCodes_ListEveryCodeOnce_WithAKnownRetry(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range ErrorCodes() {
		require.False(t, seen[c.Code], "%s is listed twice", c.Code)
		seen[c.Code] = true
		require.Contains(t, []Retry{RetryNever, RetryNothingRan, RetryUnknownOutcome}, c.Retry, c.Code)
	}
}

// TestErrorCodes_EveryDomainError_IsAnsweredWithAListedCode presents an
// error of every domain code, as a resolver's would be: its code must be in
// the list, and an answer that tells the client to wait (retryAfterMs)
// must be one the list lets it retry.
func TestErrorCodes_EveryDomainError_IsAnsweredWithAListedCode(t *testing.T) {
	t.Parallel()
	retry := map[string]Retry{}
	for _, c := range ErrorCodes() {
		retry[c.Code] = c.Retry
	}
	present := errorPresenter(slog.New(slog.NewTextHandler(io.Discard, nil)), false)
	domain := append(slices.Sorted(maps.Keys(errorCodes)), payment.EINTERNAL)
	for _, code := range domain {
		e := present(context.Background(), &payment.Error{Code: code, Message: "m", RetryAfter: time.Second})
		answered, _ := e.Extensions["code"].(string)
		require.Contains(t, retry, answered, "%s is answered %q, which ErrorCodes lacks", code, answered)
		if _, wait := e.Extensions["retryAfterMs"]; wait {
			require.Equal(t, RetryNothingRan, retry[answered], "%s tells the client to wait, then to retry", answered)
		}
	}
	require.Equal(t, RetryUnknownOutcome, retry[codeInternal])
}
