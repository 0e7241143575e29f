package graph

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/payment"
)

func TestRetryAfterMs_RoundsUp_NeverTellsAClientToComeBackEarly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		wait time.Duration
		ms   int
	}{
		{0, 1},
		{time.Nanosecond, 1},
		{999 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + time.Nanosecond, 2},
		{1500 * time.Microsecond, 2},
		{100 * time.Millisecond, 100},
		{100*time.Millisecond + 1, 101},
		{time.Second - time.Microsecond, 1000},
		{5 * time.Second, 5000},
	} {
		t.Run(tc.wait.String(), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.ms, retryAfterMs(tc.wait))
			require.GreaterOrEqual(t, time.Duration(tc.ms)*time.Millisecond, tc.wait, "never earlier than the wait")
		})
	}
}

// TestRetryAfterMs_EveryAnswerSaysTheSame checks the three kinds of answer
// that carry retryAfterMs: a PROCESSING charge, a PROCESSING refund, and an
// error refused at the edge.
func TestRetryAfterMs_EveryAnswerSaysTheSame(t *testing.T) {
	t.Parallel()
	wait := 1500 * time.Microsecond
	processing := payment.Result{Status: payment.StatusProcessing, RetryAfter: wait}

	require.Equal(t, 2, *toPayload(processing).RetryAfterMs)
	require.Equal(t, 2, *RefundPayload(processing).RetryAfterMs)

	refused := &RequestError{Code: codeRateLimited, Message: "wait", RetryAfter: wait}
	require.Equal(t, 2, refused.gqlError().Extensions["retryAfterMs"])
	w := httptest.NewRecorder()
	writeError(w, 429, refused)
	require.Equal(t, "1", w.Header().Get("Retry-After"), "the header counts whole seconds, rounded up")
}
