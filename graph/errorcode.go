package graph

import (
	"slices"

	"github.com/99designs/gqlgen/graphql/errcode"
)

// Retry is what a client may do after an error, by its extensions.code: a
// decision every client of the API takes from ErrorCodes, so that the
// checkout library, the demo and the Go tools retry the same errors.
type Retry string

const (
	// RetryNever: the error is the server's answer, and the same request
	// would get it again.
	RetryNever Retry = "never"
	// RetryNothingRan: nothing was run and no key was claimed; the same
	// request, with the same key, may be sent again after retryAfterMs.
	RetryNothingRan Retry = "nothingRan"
	// RetryUnknownOutcome: something unexpected happened and the request
	// may have run; sending it again with the same key is always safe, and
	// finds out.
	RetryUnknownOutcome Retry = "unknownOutcome"
)

// Codes the domain's errors are answered with (errorCodes), and those of
// errors gqlgen or the presenter raise; the edge's are in transport.go.
const (
	codeKeyReused        = "IDEMPOTENCY_KEY_REUSED"
	codeOrderPaid        = "ORDER_ALREADY_PAID"
	codeUnauthenticated  = "UNAUTHENTICATED"
	codeNotFound         = "NOT_FOUND"
	codeSessionPaid      = "CHECKOUT_SESSION_PAID"
	codeSessionExpired   = "CHECKOUT_SESSION_EXPIRED"
	codeSessionLocked    = "CHECKOUT_SESSION_LOCKED"
	codeChargeNotFound   = "CHARGE_NOT_FOUND"
	codeRefundExceeds    = "REFUND_EXCEEDS_CHARGE"
	codeCaptureExceeds   = "CAPTURE_EXCEEDS_AUTHORIZATION"
	codeNotCapturable    = "CHARGE_NOT_CAPTURABLE"
	codeChargeVoided     = "CHARGE_VOIDED"
	codeChargeCaptured   = "CHARGE_CAPTURED"
	codeAuthExpired      = "AUTHORIZATION_EXPIRED"
	codeInternal         = "INTERNAL_SERVER_ERROR"
	codeParseFailed      = errcode.ParseFailed
	codeValidationFailed = errcode.ValidationFailed
	// gqlgen's automatic persisted queries answer it to a hash they do not
	// know: the client sends the document with its hash.
	codePersistedQueryNotFound = "PERSISTED_QUERY_NOT_FOUND"
)

// ErrorCode is one extensions.code the API answers, and what a client may
// do after it.
type ErrorCode struct {
	Code  string
	Retry Retry
}

// errorCodeList is every extensions.code the API answers.
var errorCodeList = []ErrorCode{
	{codeBadUserInput, RetryNever},
	{codeKeyReused, RetryNever},
	{codeUnauthenticated, RetryNever},
	{codeRefundExceeds, RetryNever},
	{codeCaptureExceeds, RetryNever},
	{codeNotCapturable, RetryNever},
	{codeChargeVoided, RetryNever},
	{codeChargeCaptured, RetryNever},
	{codeAuthExpired, RetryNever},
	{codeChargeNotFound, RetryNever},
	{codeOrderPaid, RetryNever},
	{codeSessionPaid, RetryNever},
	{codeSessionExpired, RetryNever},
	{codeSessionLocked, RetryNever},
	{codeNotFound, RetryNever},
	{codeForbidden, RetryNever},
	{codeServiceUnavailable, RetryNothingRan},
	{codeRateLimited, RetryNothingRan},
	{codeRequestTooLarge, RetryNever},
	{codeComplexityLimit, RetryNever},
	{codeRequestTimeout, RetryNothingRan},
	{codeBadRequest, RetryNever},
	{codeParseFailed, RetryNever},
	{codeValidationFailed, RetryNever},
	{codePersistedQueryNotFound, RetryNever},
	{codeInternal, RetryUnknownOutcome},
}

// ErrorCodes is every extensions.code the API answers, with what a client
// may do after it: the one list that the checkout library's
// (client/src/generated/errorcodes.ts) and the Go client's
// (internal/apiclient/errorcodes.go) are generated from, by make generate.
func ErrorCodes() []ErrorCode { return slices.Clone(errorCodeList) }
