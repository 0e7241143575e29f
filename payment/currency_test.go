package payment

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/currency"
)

func TestMinorUnits(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]int{"JPY": 0, "KRW": 0, "USD": 2, "EUR": 2, "ISK": 0, "IDR": 2, "KWD": 3, "BHD": 3, "CLP": 0, "XOF": 0} {
		got, ok := MinorUnits(code)
		require.True(t, ok, code)
		require.Equal(t, want, got, code)
	}
	for _, code := range []string{
		"XXX", "XTS", // no currency, testing
		"BOV", "CHE", "CHW", "CLF", "COU", "MXV", "USN", "UYI", "UYW", // funds codes
		"XAU", "XAG", "XPD", "XPT", "XBA", "XDR", "XSU", "XUA", // metals, units of account
		"HRK", "BGN", "VEF", "MRO", "STD", "CUC", "ANG", "ZWL", "SLL", // withdrawn
		"usd", "US", "ZZZ", "",
	} {
		_, ok := MinorUnits(code)
		require.False(t, ok, code)
	}
}

// TestMinorUnits_AgreesWithCLDR checks the table against golang.org/x/text's
// CLDR data, so that a typo in a code shows: every code is one CLDR knows as
// tender, except the ones too new for it.
func TestMinorUnits_AgreesWithCLDR(t *testing.T) {
	t.Parallel()
	tooNew := map[string]bool{"VED": true, "VES": true, "MRU": true, "SLE": true, "XCG": true, "ZWG": true, "SVC": true}
	tender := map[string]bool{}
	for it := currency.Query(); it.Next(); {
		tender[it.Unit().String()] = true
	}
	for code := range minorUnits {
		if tooNew[code] {
			continue
		}
		require.True(t, tender[code], "%s is not a tender currency in CLDR", code)
	}
	require.Greater(t, len(minorUnits), 150)
}
