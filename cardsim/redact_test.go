package cardsim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactToken_NeverLogsAWholeToken(t *testing.T) {
	t.Parallel()
	require.Equal(t, "pm_car…", redactToken("pm_card_visa"))
	require.Equal(t, "pm_1NqX8…", redactToken("pm_1NqX8b2eZvKYlo2C8J1abcd"))
	for _, token := range []string{"a", "ab", "pm_card_visa", "pm_card_lostResponse"} {
		shown := strings.TrimSuffix(redactToken(token), "…")
		require.Less(t, len(shown), len(token), "%q: never the whole token", token)
		require.True(t, strings.HasPrefix(token, shown))
	}
}
