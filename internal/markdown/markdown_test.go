package markdown

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	begin = "<!-- x:begin -->"
	end   = "<!-- x:end -->"
)

func TestReplaceMarked_ReplacesOnlyBetweenTheMarkers(t *testing.T) {
	t.Parallel()
	doc := "# title\n\nintro\n" + begin + "\nold table\nold chart\n" + end + "\n\n## Next\nmore\n"

	got, err := ReplaceMarked(doc, begin, end, "\nnew table\n\n")

	require.NoError(t, err)
	require.Equal(t, "# title\n\nintro\n"+begin+"\nnew table\n"+end+"\n\n## Next\nmore\n", got)

	again, err := ReplaceMarked(got, begin, end, "new table")
	require.NoError(t, err)
	require.Equal(t, got, again, "rendering the same twice changes nothing")
}

func TestReplaceMarked_BadMarkers_Errors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc string }{
		{"none", "# title\n"},
		{"no end", begin + "\n"},
		{"no begin", end + "\n"},
		{"end first", end + "\n" + begin + "\n"},
		{"twice", begin + end + begin + end},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ReplaceMarked(tc.doc, begin, end, "x")
			require.Error(t, err)
		})
	}
}
