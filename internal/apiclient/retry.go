package apiclient

// Retry is what a client may do after an error, by its extensions.code:
// the server's own decision (graph.ErrorCodes), generated into
// errorcodes.go, so that the tools retry what the checkout library does.
type Retry int

const (
	// RetryNever: the error is the server's answer, and the same request
	// would get it again.
	RetryNever Retry = iota
	// RetryNothingRan: nothing was run and no key was claimed; the same
	// request, with the same key, may be sent again after its wait.
	RetryNothingRan
	// RetryUnknownOutcome: the request may have run; sending it again with
	// the same key is always safe, and finds out.
	RetryUnknownOutcome
)

// RetryOf is what a client may do after an error with code; RetryNever for
// a code the server does not answer.
func RetryOf(code string) Retry { return retries[code] }

// Retryable reports whether the same request, with the same key, may be
// sent again after an error with code.
func Retryable(code string) bool { return RetryOf(code) != RetryNever }
