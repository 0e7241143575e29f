package listening

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse_ReadsWhatAnnounceWrites_InBothForms(t *testing.T) {
	t.Parallel()
	for name, handler := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, want := range []Addrs{
				{API: "http://127.0.0.1:41234"},
				{API: "http://[::]:8080", Metrics: "http://127.0.0.1:9191/metrics"},
			} {
				var b bytes.Buffer
				log := slog.New(handler(&b))
				log.Info("started the embedded event broker", "url", "nats://127.0.0.1:4223")
				Announce(log, want, "production", false, "provider", "stripe http://127.0.0.1:12111 (a \"fake\")")
				var found []Addrs
				for _, line := range bytes.Split(b.Bytes(), []byte("\n")) {
					if a, ok := Parse(string(line)); ok {
						found = append(found, a)
					}
				}
				require.Equal(t, []Addrs{want}, found, "the announcement, and no other line:\n%s", b.String())
			}
		})
	}
}

func TestParse_OtherLines_AreNotAnnouncements(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		"",
		"chargeonce listening",
		`time=x level=INFO msg="try it" demo=http://localhost:8080/ playground=http://localhost:8080/playground`,
		`{"msg":"chargeonce listening"}`,
		`{"msg":"metrics listening","addr":"http://127.0.0.1:9191/metrics"}`,
		`msg="chargeonce listening" addr="http://unterminated`,
	} {
		_, ok := Parse(line)
		require.False(t, ok, "%q", line)
	}
}

func TestLoopback_IsTheAPIOnThisMachine(t *testing.T) {
	t.Parallel()
	require.Equal(t, "http://127.0.0.1:8080", Addrs{API: "http://[::]:8080"}.Loopback())
	require.Equal(t, "http://127.0.0.1:41234", Addrs{API: "http://127.0.0.1:41234"}.Loopback())
}
