package events

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BrokerConfig says which NATS to use.
type BrokerConfig struct {
	// URL is an external NATS (NATS_URL, a comma-separated list for a
	// cluster). Empty embeds one (development).
	URL string
	// StoreDir is the embedded server's JetStream file store.
	StoreDir string
	// Port is the embedded server's loopback client port, so that other
	// chargeonce processes on the machine (chargeonce consume) find it; 0
	// picks a free one.
	Port int
	// Name names the connection in the broker's monitoring.
	Name   string
	Logger *slog.Logger
}

// EmbeddedPortDefault is the embedded broker's port: not NATS's own 4222,
// so that a NATS already running on the machine is left alone.
const EmbeddedPortDefault = 4223

// Broker is a connection to NATS with JetStream, and the embedded server
// when this process runs it.
type Broker struct {
	Conn *nats.Conn
	JS   jetstream.JetStream
	// URL is where the broker listens.
	URL      string
	embedded *server.Server
}

// Open connects to cfg.URL. Without a URL it connects to the embedded
// broker on the loopback port when another local chargeonce process runs
// one, and otherwise starts it in this process. The connection reconnects
// forever: while the broker is away, publishing fails and events wait in
// the outbox.
func Open(ctx context.Context, cfg BrokerConfig) (*Broker, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Broker{URL: cfg.URL}
	if b.URL == "" {
		local := "nats://127.0.0.1:" + strconv.Itoa(cfg.Port)
		name := embeddedName(cfg.StoreDir)
		if running, ok := reachable(local); cfg.Port != 0 && ok {
			if running != name {
				return nil, fmt.Errorf("127.0.0.1:%d is taken by another event broker (%s), not the one of this data directory (%s): "+
					"set EMBEDDED_NATS_PORT to a free port, or NATS_URL", cfg.Port, running, name)
			}
			log.Info("NATS_URL is not set: using the embedded event broker of another chargeonce process on this data directory", "url", local)
			b.URL = local
		} else {
			s, err := startEmbedded(cfg)
			if err != nil {
				return nil, err
			}
			b.embedded, b.URL = s, s.ClientURL()
			log.Info("NATS_URL is not set: started the embedded event broker", "url", b.URL, "store", cfg.StoreDir)
		}
	}
	conn, err := nats.Connect(b.URL,
		nats.Name(cfg.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("event broker connection lost; events wait in the outbox", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("event broker connection back", "url", c.ConnectedUrlRedacted()) }),
	)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("connect to NATS at %s: %w", redact(b.URL), err)
	}
	b.Conn = conn
	b.JS, err = jetstream.New(conn)
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Close closes the connection, and stops the embedded server if this
// process runs it.
func (b *Broker) Close() {
	if b.Conn != nil {
		_ = b.Conn.Drain()
		b.Conn.Close()
	}
	if b.embedded != nil {
		b.embedded.Shutdown()
		b.embedded.WaitForShutdown()
	}
}

// startEmbedded starts a NATS server with JetStream on loopback only.
func startEmbedded(cfg BrokerConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("the embedded event broker needs a store directory")
	}
	port := cfg.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return StartServer(&server.Options{
		ServerName: embeddedName(cfg.StoreDir),
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true, // signals are the chargeonce process's
		NoLog:      true,
	}, "the embedded event broker", " (is the port taken? set EMBEDDED_NATS_PORT, or NATS_URL)")
}

// StartServer makes opts.StoreDir, starts a NATS server (what names it in
// errors, and hint follows the one for a server that does not start), and
// returns once it takes clients: the embedded broker, and each node of the
// lab's NATS cluster.
func StartServer(opts *server.Options, what, hint string) (*server.Server, error) {
	if err := os.MkdirAll(opts.StoreDir, 0o700); err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	s.ConfigureLogger() // nothing with NoLog
	s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("%s did not start on 127.0.0.1:%d%s", what, max(opts.Port, 0), hint)
	}
	return s, nil
}

// reachable reports whether a NATS server answers at url, and its name.
func reachable(url string) (name string, ok bool) {
	c, err := nats.Connect(url, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return "", false
	}
	defer c.Close()
	return c.ConnectedServerName(), true
}

// embeddedName names the embedded broker after its store, so that a process
// shares only the broker of its own data directory: two checkouts on one
// machine, each with its database, must not mix their events.
func embeddedName(storeDir string) string {
	sum := sha256.Sum256([]byte(storeDir))
	return "chargeonce-embedded-" + hex.EncodeToString(sum[:6])
}

// redact hides the credentials of a NATS_URL (a comma-separated list), for
// errors and logs.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = "(unparsable)"
			continue
		}
		if u.User != nil { // user:password, or a token in the user's place
			u.User = url.User("REDACTED")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// Ping checks that the broker answers, for readiness.
func (b *Broker) Ping(ctx context.Context) error {
	if b.Conn.Status() != nats.CONNECTED {
		return fmt.Errorf("%w: %s", errNoBroker, b.Conn.Status())
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	return b.Conn.FlushWithContext(ctx)
}
