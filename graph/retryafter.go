package graph

import (
	"strconv"
	"time"
)

// retryAfterMs is d as every retryAfterMs the API answers, in an error's
// extensions or a PROCESSING payload: milliseconds, rounded up, at least 1,
// so that a client told to wait never comes back early.
func retryAfterMs(d time.Duration) int {
	return int(max((d+time.Millisecond-1)/time.Millisecond, 1))
}

// retryAfterSeconds is d for the Retry-After header, which counts whole
// seconds: rounded up, at least 1, for the same reason.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(int(max((d+time.Second-1)/time.Second, 1)))
}
