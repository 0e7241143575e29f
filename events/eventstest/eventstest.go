// Package eventstest starts real NATS servers with JetStream, embedded in
// the test process on loopback, for tests of chargeonce's events. Tests never
// use a NATS of the machine's.
package eventstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"chargeonce/payment"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// Server is an embedded NATS server with JetStream on a file store. It can
// be stopped and started again on the same port and store, as a broker
// that goes away for a while and comes back with what it had.
type Server struct {
	dir  string
	port int
	mu   sync.Mutex
	s    *server.Server
}

// Start starts a server in dir on a free loopback port.
func Start(dir string) (*Server, error) {
	s := &Server{dir: dir, port: server.RANDOM_PORT}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// New starts a server for t, stopped when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's client URL, the same across restarts.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Stop shuts the server down; its store stays.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		s.s.Shutdown()
		s.s.WaitForShutdown()
		s.s = nil
	}
}

// Restart starts the server again, on its port and store.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		return nil
	}
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: s.port, JetStream: true, StoreDir: s.dir, NoSigs: true, NoLog: true,
	})
	if err != nil {
		return err
	}
	ns.Start()
	if !ns.ReadyForConnections(20 * time.Second) {
		ns.Shutdown()
		return fmt.Errorf("embedded NATS did not start on port %d", s.port)
	}
	s.s = ns
	s.port = ns.Addr().(*net.TCPAddr).Port
	return nil
}

// JetStream connects to the server for t, closed when t ends.
func (s *Server) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

var (
	shared     *Server
	sharedErr  error
	sharedOnce sync.Once
	sharedDir  string
)

// Shared is one server for the whole test binary, for tests that only need
// a broker to be there. Tests that read the stream or run consumers start
// their own with New. StopShared ends it.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedOnce.Do(func() {
		if sharedDir, sharedErr = os.MkdirTemp("", "chargeonce-nats-"); sharedErr == nil {
			shared, sharedErr = Start(sharedDir)
		}
	})
	require.NoError(t, sharedErr)
	return shared
}

// StopShared stops the shared server and removes its store, from TestMain.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
	if sharedDir != "" {
		_ = os.RemoveAll(sharedDir)
	}
}

// Message is one message of a stream: its Nats-Msg-Id, its subject, and the
// chargeonce event it carries.
type Message struct {
	MsgID, Subject string
	Event          payment.Event
}

// ReadStream reads every message of the stream named stream (events.Stream,
// which this package cannot name: events' own tests use it), in order; each
// must be a chargeonce event.
func ReadStream(t testing.TB, js jetstream.JetStream, stream string) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	total := int(info.State.Msgs)
	out := make([]Message, 0, total)
	if total == 0 {
		return out
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	for len(out) < total {
		batch, err := cons.Fetch(total-len(out), jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		for msg := range batch.Messages() {
			e, err := payment.ParseEvent(msg.Data())
			require.NoError(t, err)
			out = append(out, Message{MsgID: msg.Headers().Get(jetstream.MsgIDHeader), Subject: msg.Subject(), Event: e})
		}
		require.NoError(t, batch.Error())
	}
	return out
}

// DistinctMsgIDs is how many different Nats-Msg-Ids msgs carry: as many as
// msgs when none of them is on the stream twice.
func DistinctMsgIDs(msgs []Message) int {
	ids := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		ids[m.MsgID] = true
	}
	return len(ids)
}
