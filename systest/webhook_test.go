package systest

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/webhook"
)

// webhookCommand runs `chargeonce webhook ARGS…` against dbURL, with env
// on top.
func webhookCommand(t *testing.T, dbURL string, env map[string]string) func(args ...string) commandResult {
	vars := map[string]string{"DATABASE_URL": dbURL}
	maps.Copy(vars, env)
	return func(args ...string) commandResult {
		t.Helper()
		return runCommand(t, vars, append([]string{"webhook"}, args...)...)
	}
}

// printedSecret is the signing secret `webhook set` printed.
func printedSecret(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "whsec_") {
			return l
		}
	}
	t.Fatalf("no secret printed:\n%s", out)
	return ""
}

// TestWebhookCommands_SetReplaceListRemove walks an operator through an
// endpoint's life, and the refusals on the way.
func TestWebhookCommands_SetReplaceListRemove(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	startServer(t, map[string]string{"DATABASE_URL": dbURL}) // a development server: the demo merchant exists
	command := webhookCommand(t, dbURL, nil)

	set := command("set", "demo", "http://127.0.0.1:8081/hooks")
	set.requireOK(t)
	lines := strings.Split(set.stdout, "\n")
	require.Equal(t, "Registered the webhook endpoint of merchant demo: http://127.0.0.1:8081/hooks", lines[0])
	require.Equal(t, "Signing secret (shown once; give it to the receiver, which checks the Chargeonce-Signature header with it):", lines[1])
	first := printedSecret(t, set.stdout)
	require.Regexp(t, `^whsec_[A-Za-z0-9_-]{43}$`, first)

	replaced := command("set", "demo", "https://hooks.example.com/chargeonce")
	replaced.requireOK(t)
	out := replaced.stdout
	require.True(t, strings.HasPrefix(out, "Replaced the webhook endpoint of merchant demo: https://hooks.example.com/chargeonce\n"), out)
	second := printedSecret(t, out)
	require.NotEqual(t, first, second, "a new secret every time")
	require.Contains(t, out, "The previous secret signs nothing from now on")

	list := command("list")
	list.requireOK(t)
	out = list.stdout
	require.NotContains(t, out+list.stderr, "whsec_", "never the secret")
	rows := listRows(t, out)
	require.Equal(t, []string{"MERCHANT", "URL", "CREATED", "UPDATED"}, rows[0])
	require.Len(t, rows, 2, out)
	require.Equal(t, []string{"demo", "https://hooks.example.com/chargeonce"}, rows[1][:2])
	_, err := time.Parse(time.RFC3339, rows[1][2])
	require.NoError(t, err)
	require.Contains(t, out, "1 webhook endpoint(s)")

	deliveries := command("deliveries", "demo", "--limit", "5")
	deliveries.requireOK(t)
	require.Contains(t, deliveries.stdout, "EVENT  TYPE  ATTEMPT  STARTED  DURATION  STATE  NEXT ATTEMPT  RESULT")
	require.Contains(t, deliveries.stdout, "0 row(s)")

	removed := command("remove", "demo")
	removed.requireOK(t)
	require.Equal(t, "Removed the webhook endpoint of merchant demo (https://hooks.example.com/chargeonce) and its delivery log; 0 pending deliveries will not be sent.\n", removed.stdout)
	require.Empty(t, removed.stderr)
	command("remove", "demo").requireFailed(t, webhook.ErrNoEndpoint.Error(),
		"merchant demo has no webhook endpoint; register one with `chargeonce webhook set demo URL`")
	command("deliveries", "demo").requireFailed(t, webhook.ErrNoEndpoint.Error())

	command("set", "nobody", "https://hooks.example.com/").requireFailed(t,
		"no such merchant named nobody; create one with `chargeonce apikey create nobody`")
	for url, why := range map[string]string{
		"hooks.example.com/x":               "absolute http:// or https://",
		"https://user:pw@hooks.example.com": "credentials",
	} {
		command("set", "demo", url).requireFailed(t, webhook.ErrInvalidURL.Error(), why)
	}
	production := webhookCommand(t, dbURL, map[string]string{"APP_ENV": "production", "PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_0123456789abcdef",
		"NATS_URL": "nats://127.0.0.1:9"})
	production("set", "demo", "http://127.0.0.1:8081/hooks").requireFailed(t,
		"invalid webhook URL: it must be https:// when APP_ENV=production")
	production("set", "demo", "https://hooks.example.com/chargeonce").requireOK(t)

	for _, args := range [][]string{{}, {"set", "demo"}, {"list", "x"}, {"remove"}, {"deliveries"}, {"deliveries", "demo", "--limit"}, {"nope"}} {
		command(args...).requireUsage(t)
	}
	command("deliveries", "demo", "--limit", "many").requireFailed(t, "--limit must be a whole number from 1 to 10000")
}
