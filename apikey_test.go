package main

import (
	"chargeonce/internal/cli"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAPIKeyCommands_RotateThenRevoke_OldKeyIsRefused walks an operator
// through a rotation: create, rotate (both keys work), list, revoke the old
// key (the server refuses it within a notification's latency, the new one
// still works).
func TestAPIKeyCommands_RotateThenRevoke_OldKeyIsRefused(t *testing.T) {
	t.Parallel()
	s, dbURL := setup(t)
	getenv := func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] }
	command := func(args ...string) (string, error) {
		var out syncBuffer
		err := run(context.Background(), append([]string{"chargeonce", "apikey"}, args...), getenv, &out, &out)
		return out.String(), err
	}

	out, err := command("create", "shop")
	require.NoError(t, err)
	fields := strings.Fields(out)
	oldKey := fields[len(fields)-1]
	oldPrefix := oldKey[:len("co_sk_")+4]

	out, err = command("rotate", "shop")
	require.NoError(t, err, out)
	lines := strings.Split(out, "\n")
	require.Equal(t, "New API key for merchant shop (shown once; only its hash is stored):", lines[0])
	rotatedKey := lines[1]
	require.True(t, strings.HasPrefix(rotatedKey, "co_sk_"), out)
	require.NotEqual(t, oldKey, rotatedKey)
	require.NotContains(t, out, oldKey, "the old key is never shown again")
	require.Contains(t, out, "These keys stay valid until you revoke them:")
	require.Regexp(t, `(?m)^  `+oldPrefix+` +[0-9a-f-]{36} +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, out)
	require.Contains(t, out, "chargeonce apikey revoke <prefix>")
	for _, key := range []string{oldKey, rotatedKey} {
		require.Equal(t, "SUCCEEDED", s.chargeCard(t, key, newKey(), visa(100)).Data.ChargeCard.Status)
	}

	out, err = command("list")
	require.NoError(t, err)
	require.NotContains(t, out, oldKey)
	require.NotContains(t, out, rotatedKey)
	require.NotContains(t, out, "demo-key")
	rows := listRows(t, out)
	require.Equal(t, []string{"ID", "MERCHANT", "PREFIX", "CREATED", "REVOKED", "DEV"}, rows[0])
	require.Len(t, rows, 4, out)
	require.Equal(t, []string{"demo", "demo", "-", "yes"}, []string{rows[1][1], rows[1][2], rows[1][4], rows[1][5]})
	require.Equal(t, []string{"shop", oldPrefix, "-", "-"}, []string{rows[2][1], rows[2][2], rows[2][4], rows[2][5]})
	require.Equal(t, []string{"shop", rotatedKey[:10], "-", "-"}, []string{rows[3][1], rows[3][2], rows[3][4], rows[3][5]})
	_, err = time.Parse(time.RFC3339, rows[2][3])
	require.NoError(t, err)
	require.Contains(t, out, "3 API key(s), 3 live")
	oldID := rows[2][0]

	out, err = command("revoke", oldPrefix)
	require.NoError(t, err)
	require.Regexp(t, `^Revoked API key `+oldPrefix+` \(id `+oldID+`\) of merchant shop at \S+Z; requests with it are refused from now on.\n$`, out)
	// The command runs in another process's stead; its revocation reaches
	// the server's cache of authentications by NOTIFY at commit, within
	// milliseconds, so the server is asked (without charging) until it
	// refuses, and then must refuse a charge.
	require.Eventually(t, func() bool {
		r := s.chargeStatus(t, oldKey, newKey())
		return len(r.Errors) == 1 && r.Errors[0].Extensions["code"] == "UNAUTHENTICATED"
	}, 2*time.Second, 5*time.Millisecond, "the revoked key is refused")
	require.Equal(t, "UNAUTHENTICATED", s.chargeCard(t, oldKey, newKey(), visa(100)).code(t))
	require.Equal(t, "SUCCEEDED", s.chargeCard(t, rotatedKey, newKey(), visa(100)).Data.ChargeCard.Status)

	out, err = command("list")
	require.NoError(t, err)
	rows = listRows(t, out)
	_, err = time.Parse(time.RFC3339, rows[2][4])
	require.NoError(t, err, "the revoked key shows when: %s", out)
	require.Contains(t, out, "3 API key(s), 2 live")

	_, err = command("revoke", oldID)
	require.ErrorContains(t, err, "already revoked at")
	_, err = command("rotate", "nobody")
	require.ErrorContains(t, err, "no merchant named nobody; create one with `chargeonce apikey create nobody`")
	_, err = command("revoke")
	require.ErrorIs(t, err, cli.ErrUsage)
}

// listRows splits `apikey list` output into the table's rows and fields,
// without the summary line.
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

// TestAuthCache_RepeatedKey_IsServedFromTheCache checks that a server runs
// the API key cache's listener: once it listens, a key it has seen is
// answered without the database.
func TestAuthCache_RepeatedKey_IsServedFromTheCache(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	hits := func() float64 {
		return scrape(t, s.client, s.URL+"/metrics").value("chargeonce_auth_cache_total", "result", "hit")
	}
	require.Zero(t, hits())
	require.Eventually(t, func() bool {
		require.Nil(t, s.chargeStatus(t, "demo-key", newKey()).Data.ChargeStatus)
		return hits() > 0
	}, 10*time.Second, 20*time.Millisecond, "the listener starts with the server; the cache answers from then on")
}
