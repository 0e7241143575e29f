package payment

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/sqlc"
)

// TestOperations_EveryKind_PlugsInWhole checks that each registered kind
// brings what the engine asks of it: an operation made for a Service, and
// a conversion of its stored row to terms of its own kind.
func TestOperations_EveryKind_PlugsInWhole(t *testing.T) {
	t.Parallel()
	require.GreaterOrEqual(t, len(operations), 2, "the charge and the refund at least")
	s := &Service{ops: map[Kind]operation{}}
	for kind, op := range operations {
		require.NotNil(t, op(s), kind)
		fromRow, ok := termsFromRow[kind]
		require.True(t, ok, "kind %q converts its rows (termsFromRow)", kind)
		a := attemptOf(attemptRow{ChargeAttempt: sqlc.ChargeAttempt{ID: uuid.New(), Kind: string(kind), Status: string(StatusProcessing)}})
		require.Equal(t, kind, a.Terms.Kind(), "a %s row reads as %s terms", kind, kind)
		require.Equal(t, kind, fromRow(attemptRow{}).Kind())
	}
	require.Len(t, termsFromRow, len(operations), "no row conversion without its operation")
}
