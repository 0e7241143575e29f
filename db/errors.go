package db

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Kind is what an error of a statement means to the code that ran it. The
// stores of chargeonce's packages ask Classify, and turn each kind into an
// error of their own domain; nothing above a store looks at pgx's errors.
type Kind int

const (
	// Other is any error that is none of the kinds below: a bug, or a
	// refusal the caller did not expect.
	Other Kind = iota
	// NotFound: the statement read or changed no row (pgx.ErrNoRows).
	NotFound
	// Unavailable: the database could not be used (unreachable,
	// restarting, out of connections, read-only after a failover, too slow
	// to answer), as opposed to having refused the statement: the same
	// statement may well succeed once it is back.
	Unavailable
	// UniqueViolation: SQLSTATE 23505, on the constraint Classify names.
	UniqueViolation
	// ForeignKeyViolation: SQLSTATE 23503, on the constraint Classify names.
	ForeignKeyViolation
)

// Classify says what err means, and for a constraint violation, which
// constraint (by the name the migrations give it).
func Classify(err error) (kind Kind, constraint string) {
	if err == nil {
		return Other, ""
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return NotFound, ""
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return UniqueViolation, pgErr.ConstraintName
		case pgErr.Code == "23503":
			return ForeignKeyViolation, pgErr.ConstraintName
		case unavailableCode(pgErr.Code):
			return Unavailable, ""
		}
		return Other, ""
	}
	if unreachable(err) {
		return Unavailable, ""
	}
	return Other, ""
}

// IsUnavailable reports whether err says that the database could not be
// used (Classify's Unavailable): an outage, which passes.
func IsUnavailable(err error) bool {
	kind, _ := Classify(err)
	return kind == Unavailable
}

// unavailableCode reports whether a server's SQLSTATE says it cannot serve
// now rather than that it refuses the statement.
func unavailableCode(code string) bool {
	switch code {
	case "53300", // too_many_connections
		"57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
		"25006": // read_only_sql_transaction: a standby, e.g. mid-failover
		return true
	}
	return strings.HasPrefix(code, "08") // connection_exception
}

// unreachable reports whether err, which the server did not send, says
// that the connection could not be made or was lost, or that the caller's
// deadline passed while it waited (for a connection from the pool, or for
// the answer).
func unreachable(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// ErrNotSent marks a statement that never reached the database: the caller
// got no connection for it. Wrap the cause with it (fmt.Errorf("%w: %w",
// db.ErrNotSent, err)) to let MayHaveRun say so.
var ErrNotSent = errors.New("no database connection")

// MayHaveRun reports whether a statement that failed may nevertheless have
// run, and committed: the connection broke or timed out after it was sent,
// and only its reply is missing.
func MayHaveRun(err error) bool {
	var connectErr *pgconn.ConnectError
	return !errors.Is(err, ErrNotSent) && !errors.As(err, &connectErr) && !pgconn.SafeToRetry(err)
}
