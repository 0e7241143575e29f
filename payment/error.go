package payment

import (
	"errors"
	"fmt"
	"time"

	"chargeonce/db"
)

// Error codes of the domain. The GraphQL layer maps each to an
// extensions.code; anything that is not an *Error is internal.
const (
	EINVALID        = "invalid"                // bad key or input; nothing was stored
	EKEYREUSED      = "idempotency_key_reused" // same key, different request; nothing was charged
	EORDERPAID      = "order_already_paid"     // another key paid, or is paying, this order; nothing was charged
	ESESSIONPAID    = "session_paid"           // another key paid, or is paying, this checkout session; nothing was charged
	ESESSIONEXPIRED = "session_expired"        // the checkout session expired; nothing was charged
	ESESSIONLOCKED  = "session_locked"         // the checkout session took its maximum of attempts; nothing was charged
	EFORBIDDEN      = "forbidden"              // the API key's kind may not do this; nothing was run
	ECHARGENOTFOUND = "charge_not_found"       // no such charge of this merchant; nothing was refunded
	EREFUNDEXCEEDS  = "refund_exceeds_charge"  // more than remains refundable; nothing was refunded (Error.Refundable)
	// The refusals of captures and voids; nothing was claimed or sent.
	ECAPTUREEXCEEDS  = "capture_exceeds_authorization" // more than remains capturable (Error.Capturable)
	ENOTCAPTURABLE   = "charge_not_capturable"         // automatic, captured in full, or its final capture claimed
	EVOIDED          = "charge_voided"                 // the authorization is voided, or its void claimed
	ECAPTURED        = "charge_captured"               // a void of a charge with a capture, made or claimed
	EAUTHEXPIRED     = "authorization_expired"         // the authorization lapsed
	EUNAUTHENTICATED = "unauthenticated"               // no or unknown API key
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
	// Refundable is what remains refundable of the charge (EREFUNDEXCEEDS).
	Refundable int64
	// Capturable is what remains capturable of the authorization
	// (ECAPTUREEXCEEDS).
	Capturable int64
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

// Invalid returns an EINVALID error about one input field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
}

// errNotFound is a missing row, as DBError returns it.
var errNotFound = Errorf(ENOTFOUND, "not found")

// UnavailableRetryAfter is the retry hint of an EUNAVAILABLE answer.
const UnavailableRetryAfter = time.Second

// DBError turns an error of the database into the domain's, as every store
// of the domain returns its errors (see db.Classify): a missing row is
// ENOTFOUND, a database that cannot be used (unreachable, restarting, out
// of connections, read-only after a failover, too slow) is EUNAVAILABLE,
// with its retry hint; anything else is returned as it is.
func DBError(err error) error {
	switch kind, _ := db.Classify(err); kind {
	case db.NotFound:
		return errNotFound
	case db.Unavailable:
		return &Error{Code: EUNAVAILABLE, RetryAfter: UnavailableRetryAfter, Err: err,
			Message: "the payment database is unavailable; retry the same request with the same idempotency key after retryAfterMs"}
	}
	return err
}

// ErrorCode returns the code of err, EINTERNAL for errors of unknown kind.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}
