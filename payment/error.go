package payment

import (
	"errors"
	"fmt"
	"time"
)

// Error codes of the domain. The GraphQL layer maps each to an
// extensions.code; anything that is not an *Error is internal.
const (
	EINVALID         = "invalid"                // bad key or input; nothing was stored
	EKEYREUSED       = "idempotency_key_reused" // same key, different request; nothing was charged
	EORDERPAID       = "order_already_paid"     // another key paid, or is paying, this order; nothing was charged
	EUNAUTHENTICATED = "unauthenticated"        // no or unknown API key
	ENOTFOUND        = "not_found"
	// EUNAVAILABLE: the database cannot be reached or is saturated; nothing
	// was charged, and the same request may be retried after RetryAfter.
	EUNAVAILABLE = "unavailable"
	// ELIMITED: a bound was reached (live status subscriptions); nothing was
	// started, and the same request may be retried after RetryAfter.
	ELIMITED  = "limited"
	EINTERNAL = "internal"
)

// Error is an error the caller may see. Message is written for the API's
// user; Field names the offending input, when there is one.
type Error struct {
	Code    string
	Message string
	Field   string
	// RetryAfter says when a retry may succeed (EUNAVAILABLE).
	RetryAfter time.Duration
	// Err is the cause, for the log; it is never shown to the API's user.
	Err error
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	msg := fmt.Sprintf("payment: %s: %s", e.Code, e.Message)
	if e.Field != "" {
		msg += " (" + e.Field + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Errorf returns an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// invalid returns an EINVALID error about one input field.
func invalid(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, EINTERNAL for errors of unknown kind.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}
