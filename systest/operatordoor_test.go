package systest

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/webhook"
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

// TestWebhookCommand_Production_RefusesInternalAddresses: `webhook set` in
// production refuses an endpoint on the cloud's metadata service, on
// loopback or on a private network, which the delivery worker would POST
// signed events to from inside; WEBHOOK_ALLOW_PRIVATE_NETWORKS lets a
// private network in, never the rest.
func TestWebhookCommand_Production_RefusesInternalAddresses(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	run := productionCommand(t, dbURL, nil)
	run("apikey", "create", "acme").requireOK(t)
	for url, why := range map[string]string{
		"https://169.254.169.254/latest/meta-data/":         "169.254.169.254 is a link-local address",
		"https://metadata.google.internal/computeMetadata/": "metadata.google.internal is a cloud metadata service",
		"https://127.0.0.1:8443/hooks":                      "127.0.0.1 is a loopback address",
		"https://localhost/hooks":                           "is a loopback address",
		"https://10.0.0.5/hooks":                            "10.0.0.5 is a private address",
		"https://[::ffff:10.0.0.5]/hooks":                   "10.0.0.5 is a private address",
	} {
		run("webhook", "set", "acme", url).requireFailed(t, webhook.ErrInvalidURL.Error(), why, "APP_ENV=production")
	}
	run("webhook", "list").requireOK(t)
	require.Contains(t, run("webhook", "list").stdout, "0 webhook endpoint(s)", "nothing registered")

	private := productionCommand(t, dbURL, map[string]string{"WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true"})
	private("webhook", "set", "acme", "https://10.0.0.5/hooks").requireOK(t)
	private("webhook", "set", "acme", "https://169.254.169.254/latest/meta-data/").requireFailed(t, "169.254.169.254 is a link-local address")
	private("webhook", "set", "acme", "https://127.0.0.1/hooks").requireFailed(t, "127.0.0.1 is a loopback address")
}
