// Package scalar holds chargeonce's bindings of GraphQL scalars, for gqlgen
// (gqlgen.yml points Int here). It is its own package because the generated
// executor imports it, and package graph imports the executor.
package scalar

import (
	"encoding/json"
	"io"
	"math"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
)

// NotIntegerError is the answer to an Int input that is not an integer: a
// string ("100"), a fraction (1.5), an exponent form (1e3) or out of range.
// The GraphQL error presenter names the field it was given for.
type NotIntegerError struct {
	Got string // what was sent instead, described, never quoted
}

// IntRule says what an Int input must be.
const IntRule = "must be an integer (a JSON number without a fraction or an exponent, e.g. 1999)"

func (e *NotIntegerError) Error() string { return IntRule + "; got " + e.Got }

// MarshalStrictInt writes an Int.
func MarshalStrictInt(i int) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) { _, _ = io.WriteString(w, strconv.Itoa(i)) })
}

// UnmarshalStrictInt reads an Int input as the GraphQL spec's input coercion
// does: an integer literal, or a JSON integer in variables. Unlike gqlgen's
// graphql.UnmarshalInt, it refuses strings, so "100" is not silently read as
// 100 (and charged).
func UnmarshalStrictInt(v any) (int, error) {
	switch v := v.(type) {
	case int:
		return v, nil
	case int32:
		return int(v), nil
	case int64:
		return int(v), nil
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, &NotIntegerError{Got: "a number that is not an integer in range"}
		}
		return int(n), nil
	case float64:
		// Variables handed over by Go code rather than decoded from JSON.
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, &NotIntegerError{Got: "a number that is not an integer in range"}
		}
		return int(v), nil
	case string:
		return 0, &NotIntegerError{Got: "a string"}
	case bool:
		return 0, &NotIntegerError{Got: "a boolean"}
	case nil:
		return 0, &NotIntegerError{Got: "null"}
	default:
		return 0, &NotIntegerError{Got: "a value of another type"}
	}
}
