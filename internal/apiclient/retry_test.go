package apiclient_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/graph"
	"chargeonce/internal/apiclient"
)

func TestRetryOf_IsTheServersDecision_ForEveryCode(t *testing.T) {
	t.Parallel()
	same := map[graph.Retry]apiclient.Retry{
		graph.RetryNever:          apiclient.RetryNever,
		graph.RetryNothingRan:     apiclient.RetryNothingRan,
		graph.RetryUnknownOutcome: apiclient.RetryUnknownOutcome,
	}
	for _, c := range graph.ErrorCodes() {
		require.Equal(t, same[c.Retry], apiclient.RetryOf(c.Code), c.Code)
		require.Equal(t, c.Retry != graph.RetryNever, apiclient.Retryable(c.Code), c.Code)
	}
	require.False(t, apiclient.Retryable("NO_SUCH_CODE"), "a code the server never answers is not retried")
}
