// Package listening is the line in which a chargeonce server says where it
// listens, once it does: the API's address and, when METRICS_ADDR gives
// them a listener of their own, the metrics'. The server writes it into its
// log (Announce), as text or JSON; the tools and tests that run a server as
// a process read it from there (Parse), in this one form.
package listening

import (
	"encoding/json"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
)

// Message is the announcement's log message.
const Message = "chargeonce listening"

// Addrs are where a server listens.
type Addrs struct {
	// API is the URL of the API's listener, e.g. http://127.0.0.1:8080, or
	// http://[::]:8080 when it listens on every interface.
	API string
	// Metrics is the URL of /metrics on a listener of its own, "" when the
	// metrics are only on the API's listener.
	Metrics string
}

// Announce logs a's announcement, with attrs after the addresses.
func Announce(log *slog.Logger, a Addrs, attrs ...any) {
	args := []any{"addr", a.API}
	if a.Metrics != "" {
		args = append(args, "metrics", a.Metrics)
	}
	log.Info(Message, append(args, attrs...)...)
}

// Loopback is the API's URL on 127.0.0.1, the address to reach a server on
// this machine by, whatever interface it listens on.
func (a Addrs) Loopback() string {
	u, err := url.Parse(a.API)
	if err != nil {
		return a.API
	}
	return "http://127.0.0.1:" + u.Port()
}

// Parse reads an announcement from one line of a server's log, in the text
// or the JSON form; ok is false for any other line.
func Parse(line string) (a Addrs, ok bool) {
	line = strings.TrimSpace(line)
	var attrs map[string]string
	if strings.HasPrefix(line, "{") {
		var v map[string]any
		if json.Unmarshal([]byte(line), &v) != nil {
			return Addrs{}, false
		}
		attrs = map[string]string{}
		for k, x := range v {
			if s, isString := x.(string); isString {
				attrs[k] = s
			}
		}
	} else {
		attrs = textAttrs(line)
	}
	if attrs["msg"] != Message || attrs["addr"] == "" {
		return Addrs{}, false
	}
	return Addrs{API: attrs["addr"], Metrics: attrs["metrics"]}, true
}

// textAttrs reads the key=value pairs of a line of slog's text form, in
// which a value with spaces or quotes is quoted as a Go string.
func textAttrs(line string) map[string]string {
	attrs := map[string]string{}
	for line != "" {
		key, rest, found := strings.Cut(line, "=")
		if !found {
			break
		}
		key = strings.TrimSpace(key)
		var value string
		if strings.HasPrefix(rest, `"`) {
			quoted, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			value, _ = strconv.Unquote(quoted)
			rest = rest[len(quoted):]
		} else {
			value, rest, _ = strings.Cut(rest, " ")
		}
		attrs[key] = value
		line = strings.TrimLeft(rest, " ")
	}
	return attrs
}
