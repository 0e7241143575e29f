package systest

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// The operator commands of the public door, run as an operator runs them
// against a production database: what production must refuse to register.

// productionCommand runs `chargeonce ARGS…` as production runs it, against
// dbURL, with env on top.
func productionCommand(t *testing.T, dbURL string, env map[string]string) func(args ...string) commandResult {
	vars := map[string]string{"DATABASE_URL": dbURL, "APP_ENV": "production", "PROVIDER": "stripe",
		"STRIPE_SECRET_KEY": "sk_live_0123456789abcdef", "NATS_URL": "nats://127.0.0.1:9"}
	maps.Copy(vars, env)
	return func(args ...string) commandResult {
		t.Helper()
		return runCommand(t, vars, args...)
	}
}

// TestOriginsCommand_Production_RefusesPlainHTTP: `merchant origins add`
// in production refuses an http:// origin, loopback included, and says
// why; https is registered.
func TestOriginsCommand_Production_RefusesPlainHTTP(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	run := productionCommand(t, dbtest.NewDatabase(t), nil)
	run("apikey", "create", "shop", "--publishable").requireOK(t)
	for _, origin := range []string{"http://127.0.0.1:5173", "http://shop.example"} {
		run("merchant", "origins", "add", "shop", origin).requireFailed(t,
			"an origin must be https:// when APP_ENV=production", "plain http origins are for development")
	}
	run("merchant", "origins", "add", "shop", "https://shop.example").requireOK(t)
	list := run("merchant", "origins", "list", "shop")
	list.requireOK(t)
	rows := listRows(t, list.stdout)
	require.Len(t, rows, 2, list.stdout)
	require.Equal(t, []string{"shop", "https://shop.example"}, rows[1][:2])
}
