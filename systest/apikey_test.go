package systest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// TestAPIKeyCommands_RotateThenRevoke_OldKeyIsRefused walks an operator
// through a rotation: create, rotate (both keys work), list, revoke the old
// key (the server refuses it within a notification's latency, the new one
// still works).
func TestAPIKeyCommands_RotateThenRevoke_OldKeyIsRefused(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	command := func(args ...string) commandResult {
		return runCommand(t, map[string]string{"DATABASE_URL": dbURL}, append([]string{"apikey"}, args...)...)
	}

	created := command("create", "shop")
	created.requireOK(t)
	fields := strings.Fields(created.stdout)
	oldKey := fields[len(fields)-1]
	oldPrefix := oldKey[:len("co_sk_")+4]

	rotated := command("rotate", "shop")
	rotated.requireOK(t)
	out := rotated.stdout
	lines := strings.Split(out, "\n")
	require.Equal(t, "New API key for merchant shop (shown once; only its hash is stored):", lines[0])
	rotatedKey := lines[1]
	require.True(t, strings.HasPrefix(rotatedKey, "co_sk_"), out)
	require.NotEqual(t, oldKey, rotatedKey)
	require.NotContains(t, out+rotated.stderr, oldKey, "the old key is never shown again")
	require.Contains(t, out, "These secret keys stay valid until you revoke them:")
	require.Regexp(t, `(?m)^  `+oldPrefix+` +[0-9a-f-]{36} +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, out)
	require.Contains(t, out, "chargeonce apikey revoke <prefix>")
	for _, key := range []string{oldKey, rotatedKey} {
		require.Equal(t, "SUCCEEDED", s.chargeCard(t, key, newKey(), visa(100)).Status)
	}

	list := command("list")
	list.requireOK(t)
	out = list.stdout
	require.NotContains(t, out+list.stderr, oldKey)
	require.NotContains(t, out+list.stderr, rotatedKey)
	require.NotContains(t, out+list.stderr, apiclient.DemoAPIKey)
	rows := listRows(t, out)
	require.Equal(t, []string{"ID", "MERCHANT", "KIND", "PREFIX", "CREATED", "REVOKED", "DEV"}, rows[0])
	require.Len(t, rows, 5, out)
	cols := func(r []string) []string { return []string{r[1], r[2], r[3], r[5], r[6]} }
	require.Equal(t, []string{"demo", "secret", "demo", "-", "yes"}, cols(rows[1]))
	require.Equal(t, []string{"demo", "publishable", "co_pk", "-", "yes"}, cols(rows[2]), "the demo page's development key")
	require.Equal(t, []string{"shop", "secret", oldPrefix, "-", "-"}, cols(rows[3]))
	require.Equal(t, []string{"shop", "secret", rotatedKey[:10], "-", "-"}, cols(rows[4]))
	_, err := time.Parse(time.RFC3339, rows[3][4])
	require.NoError(t, err)
	require.Contains(t, out, "4 API key(s), 4 live")
	oldID := rows[3][0]

	revoked := command("revoke", oldPrefix)
	revoked.requireOK(t)
	require.Regexp(t, `^Revoked secret API key `+oldPrefix+` \(id `+oldID+`\) of merchant shop at \S+Z; requests with it are refused from now on.\n$`, revoked.stdout)
	require.Empty(t, revoked.stderr)
	// The command runs in another process; its revocation reaches the
	// server's cache of authentications by NOTIFY at commit, within
	// milliseconds, so the server is asked (without charging) until it
	// refuses, and then must refuse a charge.
	require.Eventually(t, func() bool {
		_, err := s.client(oldKey).ChargeStatus(t.Context(), newKey())
		return onlyCode(err) == "UNAUTHENTICATED"
	}, 2*time.Second, 5*time.Millisecond, "the revoked key is refused")
	_, err = s.client(oldKey).ChargeCard(t.Context(), newKey(), visa(100))
	require.Equal(t, "UNAUTHENTICATED", onlyCode(err), "%v", err)
	require.Equal(t, "SUCCEEDED", s.chargeCard(t, rotatedKey, newKey(), visa(100)).Status)

	list = command("list")
	list.requireOK(t)
	rows = listRows(t, list.stdout)
	_, err = time.Parse(time.RFC3339, rows[3][5])
	require.NoError(t, err, "the revoked key shows when: %s", list.stdout)
	require.Contains(t, list.stdout, "4 API key(s), 3 live")

	command("revoke", oldID).requireFailed(t, "already revoked at")
	command("rotate", "nobody").requireFailed(t, "no merchant named nobody; create one with `chargeonce apikey create nobody`")
	command("revoke").requireUsage(t)
}

// listRows splits the table a list command prints into its rows and
// fields, without the summary line.
func listRows(t *testing.T, out string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 2, out)
	var rows [][]string
	for _, l := range lines[:len(lines)-1] {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// TestPublishableKeysAndOrigins_Commands walks an operator through the
// browser integration: a publishable key (create, list, rotate, revoke
// show its kind), and the origins its checkout pages run on (add, list,
// remove), which the running server serves cross-origin at once.
func TestPublishableKeysAndOrigins_Commands(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	s := startServer(t, env)
	run := func(args ...string) commandResult { return runCommand(t, env, args...) }

	created := run("apikey", "create", "shop", "--publishable")
	created.requireOK(t)
	lines := strings.Split(created.stdout, "\n")
	require.Equal(t, "Publishable key for merchant shop (shown once; only its hash is stored):", lines[0])
	pk := lines[1]
	require.Regexp(t, `^co_pk_[A-Za-z0-9_-]{43}$`, pk)
	require.Contains(t, created.stdout, "chargeonce merchant origins add shop <origin>")
	run("apikey", "create", "shop").requireOK(t)

	rotated := run("apikey", "rotate", "shop", "--publishable")
	rotated.requireOK(t)
	require.Contains(t, rotated.stdout, "New publishable key for merchant shop")
	require.Contains(t, rotated.stdout, "These publishable keys stay valid until you revoke them:")
	require.Contains(t, rotated.stdout, pk[:10], "the other publishable key, not the secret one")
	require.NotContains(t, rotated.stdout, "co_sk_", "the secret key is not among them")

	list := run("apikey", "list")
	list.requireOK(t)
	kinds := map[string]int{}
	for _, r := range listRows(t, list.stdout)[1:] {
		if r[1] == "shop" {
			kinds[r[2]]++
		}
	}
	require.Equal(t, map[string]int{"publishable": 2, "secret": 1}, kinds, list.stdout)

	// Alone, the publishable key charges nothing.
	_, err := s.client(pk).ChargeCard(t.Context(), newKey(), visa(100))
	require.Equal(t, "FORBIDDEN", onlyCode(err), "%v", err)

	added := run("merchant", "origins", "add", "shop", "https://Shop.Example:443")
	added.requireOK(t)
	require.Equal(t, "Added origin https://shop.example for merchant shop: its publishable keys may be used from pages there.\n", added.stdout)
	run("merchant", "origins", "add", "shop", "https://shop.example").requireOK(t)
	run("merchant", "origins", "add", "shop", "http://127.0.0.1:5173").requireOK(t)
	run("merchant", "origins", "add", "shop", "https://shop.example/checkout").requireFailed(t, "an origin is scheme://host[:port]")
	run("merchant", "origins", "add", "nobody", "https://shop.example").requireFailed(t, "no merchant named nobody")
	origins := run("merchant", "origins", "list", "shop")
	origins.requireOK(t)
	rows := listRows(t, origins.stdout)
	require.Equal(t, []string{"MERCHANT", "ORIGIN", "ADDED"}, rows[0])
	require.Equal(t, [][]string{{"shop", "http://127.0.0.1:5173"}, {"shop", "https://shop.example"}}, [][]string{rows[1][:2], rows[2][:2]})
	require.Contains(t, origins.stdout, "2 origin(s)")

	preflight := func() int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodOptions, s.URL+"/graphql", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", "https://shop.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNoContent, preflight(), "the running server serves the origin at once")
	run("merchant", "origins", "remove", "shop", "https://shop.example").requireOK(t)
	require.Equal(t, http.StatusForbidden, preflight())
	run("merchant", "origins", "remove", "shop", "https://shop.example").requireFailed(t, "merchant shop has no origin https://shop.example")

	revoked := run("apikey", "revoke", pk[:10])
	revoked.requireOK(t)
	require.Contains(t, revoked.stdout, "Revoked publishable API key "+pk[:10])
	run("merchant", "origins").requireUsage(t)
}
