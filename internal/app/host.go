package app

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"chargeonce/graph"
)

// The host names a server answers for. A development server holds the
// demo key (the playground, the demo backend) and the unauthenticated
// simulator, and listens on loopback: a page of another site cannot reach
// it, unless its name is made to resolve to 127.0.0.1 after the page has
// loaded (DNS rebinding). The browser then sends that site's name as Host,
// so a server that answers only for its own names (localhost, the loopback
// addresses, HOST, and the names in ALLOWED_HOSTS) refuses it, on every
// route and before any handler runs. In production, ALLOWED_HOSTS is
// enforced when set; unset, any name is served: the proxy or load
// balancer in front decides which names reach the server.

// hostNames are the names a server answers for.
type hostNames struct {
	any   bool            // every name: production without ALLOWED_HOSTS
	names map[string]bool // in lower case, without a port
}

// answeredHosts are the names cfg's server answers for.
func answeredHosts(cfg Config) hostNames {
	if cfg.Production && len(cfg.AllowedHosts) == 0 {
		return hostNames{any: true}
	}
	h := hostNames{names: map[string]bool{}}
	for _, name := range cfg.AllowedHosts {
		h.names[name] = true
	}
	if ip, err := netip.ParseAddr(cfg.Host); cfg.Host != "" && (err != nil || !ip.IsUnspecified()) {
		// The address or name the operator bound the server to: its own.
		h.names[strings.ToLower(cfg.Host)] = true
	}
	return h
}

// answers reports whether the server answers for host, a request's Host
// (a name or an address, with or without a port).
func (h hostNames) answers(host string) bool {
	if h.any {
		return true
	}
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if name == "localhost" {
		return true
	}
	if ip, err := netip.ParseAddr(name); err == nil && ip.Unmap().IsLoopback() {
		return true
	}
	return h.names[name]
}

// nonLoopback reports whether cfg's server listens beyond this machine
// (HOST is not a loopback address nor localhost).
func nonLoopback(cfg Config) bool {
	if strings.EqualFold(cfg.Host, "localhost") {
		return false
	}
	ip, err := netip.ParseAddr(cfg.Host)
	return err != nil || !ip.IsLoopback()
}

// logHostNames says at start what a server listening beyond this machine
// answers for: in development, who may reach it is who ALLOWED_HOSTS names.
func logHostNames(cfg Config, log *slog.Logger) {
	switch {
	case cfg.Production && len(cfg.AllowedHosts) == 0:
		log.Info("ALLOWED_HOSTS is not set: any host name is served; the proxy or load balancer in front decides which reach this server")
	case !cfg.Production && nonLoopback(cfg):
		log.Warn("HOST listens beyond this machine, but a development server answers only for localhost, the loopback addresses, HOST and the host names in ALLOWED_HOSTS: name in ALLOWED_HOSTS (comma-separated) the names other machines reach it by",
			"host", cfg.Host, "allowed_hosts", strings.Join(cfg.AllowedHosts, ","))
	}
}

// probes answer for any name: load balancers and orchestrators probe an
// instance by its address, and they say nothing a stranger may not know.
var probes = map[string]bool{"/healthz": true, "/readyz": true}

// errMisdirected refuses a request for a name the server does not answer
// for; it does not echo the name.
var errMisdirected = &graph.RequestError{Code: "BAD_REQUEST", Field: "Host",
	Message: "this server does not answer for the host name of this request; an operator names the names it answers for in ALLOWED_HOSTS"}

// hostRefusalLogInterval is how often at most a refusal is logged: a page
// that rebinds a name can send many.
const hostRefusalLogInterval = 10 * time.Second

// answerOnlyFor serves next only to requests for a name of hosts (and the
// probes for any), refusing the others with 421 Misdirected Request.
func answerOnlyFor(hosts hostNames, log *slog.Logger, next http.Handler) http.Handler {
	if hosts.any {
		return next
	}
	sometimes := &rate.Sometimes{Interval: hostRefusalLogInterval}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hosts.answers(r.Host) || probes[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		sometimes.Do(func() {
			log.WarnContext(r.Context(), "refused a request for a host name this server does not answer for (add it to ALLOWED_HOSTS if it is yours); further ones are logged at most every "+hostRefusalLogInterval.String(),
				"host", truncateHost(r.Host), "path", r.URL.Path)
		})
		graph.WriteError(w, http.StatusMisdirectedRequest, errMisdirected)
	})
}

// truncateHost bounds a Host header for the log.
func truncateHost(host string) string {
	if len(host) > 100 {
		return host[:100] + "…"
	}
	return host
}

// parseAllowedHosts reads ALLOWED_HOSTS: comma-separated host names or
// addresses, without a scheme or a port.
func parseAllowedHosts(v string) ([]string, error) {
	var names []string
	for part := range strings.SplitSeq(v, ",") {
		name := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(part)), ".")
		if name == "" {
			continue
		}
		if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
			names = append(names, strings.Trim(name, "[]"))
			continue
		}
		if !validHostName(name) {
			return nil, fmt.Errorf("ALLOWED_HOSTS must be comma-separated host names or addresses without a scheme or a port (e.g. devbox.lan,api.shop.example); got %q", strings.TrimSpace(part))
		}
		names = append(names, name)
	}
	return names, nil
}

// validHostName reports whether name is a DNS name: dot-separated labels of
// letters, digits and hyphens (and underscores, which some local names use).
func validHostName(name string) bool {
	if len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
