// Package systest tests chargeonce as the real processes it runs as: a
// server killed at each dangerous point, signalled to stop, restarted on
// a PostgreSQL that went away or failed over; the operator's commands
// run as an operator runs them; what a production binary answers and
// where it listens. Its tests build the binary once per run, start every
// server and command through internal/proc, talk to them through
// internal/apiclient, and skip under go test -short, which keeps the
// in-process tests of the other packages a fast inner loop.
package systest
