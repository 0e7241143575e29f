package systest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUsage_NamesExactlyTheBinarysCommands runs chargeonce as an operator
// who does not know it yet: with no command, or one it lacks (the lab's),
// it exits 2 with the usage on stderr; help prints the same on stdout. The
// usage names every command the binary has and nothing of the lab's,
// which is a program of its own.
func TestUsage_NamesExactlyTheBinarysCommands(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	help := runCommand(t, nil, "help")
	help.requireOK(t)
	require.Empty(t, help.stderr)
	usage := help.stdout
	require.Equal(t, []string{
		"serve",
		"apikey create", "apikey rotate", "apikey list", "apikey revoke",
		"merchant origins add", "merchant origins list", "merchant origins remove",
		"webhook set", "webhook list", "webhook remove", "webhook deliveries",
		"charges show", "refunds show", "captures show", "voids show",
		"charges stuck", "refunds stuck", "charges uncaptured", "captures stuck", "reconcile --once", "consume receipts", "consume webhooks",
		"localdb stop", "help",
	}, commandsOf(t, usage))
	for _, lab := range []string{"cluster", "chaos"} {
		require.NotContains(t, usage, lab, "the lab's commands are not the binary's")
	}

	for _, args := range [][]string{nil, {"nope"}, {"cluster", "up"}, {"chaos"}} {
		r := runCommand(t, nil, args...)
		require.Equal(t, 2, r.code, "chargeonce %v:\n%s%s", args, r.stdout, r.stderr)
		require.Equal(t, usage, r.stderr, "chargeonce %v: the usage, on stderr", args)
		require.Empty(t, r.stdout, "chargeonce %v", args)
	}
}

// commandsOf lists the commands a usage names, in its order: the words
// of each synopsis after "chargeonce" up to its first argument.
func commandsOf(t *testing.T, usage string) []string {
	t.Helper()
	word := regexp.MustCompile(`^(?:[a-z]+|--[a-z]+)$`)
	var commands []string
	for line := range strings.Lines(usage) {
		synopsis, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		fields := strings.Fields(synopsis)
		if len(fields) == 0 || fields[0] != "chargeonce" {
			continue // the heading, or a description carried over
		}
		n := 1
		for n < len(fields) && word.MatchString(fields[n]) {
			n++
		}
		require.Greater(t, n, 1, "a synopsis without a command: %q", line)
		commands = append(commands, strings.Join(fields[1:n], " "))
	}
	return commands
}
