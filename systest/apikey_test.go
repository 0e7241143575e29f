package systest

import (
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
	require.Contains(t, out, "These keys stay valid until you revoke them:")
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
	require.Equal(t, []string{"ID", "MERCHANT", "PREFIX", "CREATED", "REVOKED", "DEV"}, rows[0])
	require.Len(t, rows, 4, out)
	require.Equal(t, []string{"demo", "demo", "-", "yes"}, []string{rows[1][1], rows[1][2], rows[1][4], rows[1][5]})
	require.Equal(t, []string{"shop", oldPrefix, "-", "-"}, []string{rows[2][1], rows[2][2], rows[2][4], rows[2][5]})
	require.Equal(t, []string{"shop", rotatedKey[:10], "-", "-"}, []string{rows[3][1], rows[3][2], rows[3][4], rows[3][5]})
	_, err := time.Parse(time.RFC3339, rows[2][3])
	require.NoError(t, err)
	require.Contains(t, out, "3 API key(s), 3 live")
	oldID := rows[2][0]

	revoked := command("revoke", oldPrefix)
	revoked.requireOK(t)
	require.Regexp(t, `^Revoked API key `+oldPrefix+` \(id `+oldID+`\) of merchant shop at \S+Z; requests with it are refused from now on.\n$`, revoked.stdout)
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
	_, err = time.Parse(time.RFC3339, rows[2][4])
	require.NoError(t, err, "the revoked key shows when: %s", list.stdout)
	require.Contains(t, list.stdout, "3 API key(s), 2 live")

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
