package apitest

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// TestChargeCard_ClaimReplyLost_RetryFinishesAtOnce cuts chargeonce's
// connection to PostgreSQL right after the claim has committed and before its
// reply arrives: the request cannot know it holds the attempt, answers
// SERVICE_UNAVAILABLE, and releases the lease. The client's one retry then
// finds the attempt nobody holds, takes it over and charges, instead of
// waiting a whole lease (30 s here, with the reconciler off). It takes
// milliseconds; the bound below is loose only because this machine runs many
// tests at once, some of them starting PostgreSQL servers.
func TestChargeCard_ClaimReplyLost_RetryFinishesAtOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	proxy := startPGProxy(t, dbURL)
	s := StartOn(t, proxy.url, map[string]string{"PROCESSING_LEASE": "30s", "RECONCILE_INTERVAL": "1h"})
	pool := dbtest.Open(t, dbURL) // around the proxy

	key := NewKey()
	proxy.cutInsertReply(0) // the claim is the charge's first INSERT
	first := s.Do(t, Bearer("demo-key"), ChargeCardMutation, map[string]any{"key": key, "input": Visa(1999)})
	require.Equal(t, int32(1), proxy.cuts.Load(), "the claim's reply was cut")
	require.Equal(t, "SERVICE_UNAVAILABLE", first.Code(t))

	var status string
	var leaseLeft time.Duration
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT status, greatest(locked_until - now(), interval '0') FROM charge_attempts WHERE idempotency_key = $1", key).Scan(&status, &leaseLeft))
	require.Equal(t, "PROCESSING", status, "the claim committed although its request never learned it")
	require.Zero(t, leaseLeft, "its lease was released")
	require.Empty(t, s.ProviderCharges(t, "demo", key))

	start := time.Now()
	retry := s.ChargeCard(t, "demo-key", key, Visa(1999))
	took := time.Since(start)
	require.Empty(t, retry.Errors)
	require.Equal(t, "SUCCEEDED", retry.Data.ChargeCard.Status)
	t.Logf("the retry settled the attempt in %s", took.Round(time.Millisecond))
	require.Less(t, took, 5*time.Second, "the retry finished the attempt at once, not after the 30 s lease")
	charges := s.ProviderCharges(t, "demo", key)
	require.Len(t, charges, 1)
	require.Equal(t, charges[0].ID, retry.Data.ChargeCard.Charge.ProviderChargeId)
	replay := s.ChargeCard(t, "demo-key", key, Visa(1999)).Data.ChargeCard
	require.True(t, replay.Replayed)
	require.Equal(t, retry.Data.ChargeCard.Charge.Id, replay.Charge.Id)
}

// TestChargeCard_RecordingCutOff_IsWrittenAgain cuts the connection that
// records a provider's answer (RecordChargeSucceeded, one statement that
// commits on its own) once it has committed, before the request hears so:
// the request tries the recording again on a new connection, finds it
// written, and answers SUCCEEDED itself from what was stored, rather than
// leaving the attempt to the reconciler; one charge row, one event.
func TestChargeCard_RecordingCutOff_IsWrittenAgain(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	proxy := startPGProxy(t, dbURL)
	s := StartOn(t, proxy.url, map[string]string{"RECONCILE_INTERVAL": "1h"})
	pool := dbtest.Open(t, dbURL)

	key := NewKey()
	proxy.cutInsertReply(2) // the claim, the simulator's own charge, then the recording
	p := s.ChargeCard(t, "demo-key", key, Visa(1999)).Data.ChargeCard
	require.Equal(t, int32(1), proxy.cuts.Load(), "the recording was cut")
	require.Equal(t, "SUCCEEDED", p.Status)
	require.False(t, p.Replayed)
	require.Len(t, s.ProviderCharges(t, "demo", key), 1)
	var recorded int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM charges").Scan(&recorded))
	require.Equal(t, 1, recorded)
	var events int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM charge_events WHERE idempotency_key = $1 AND type = 'charge.succeeded'", key).Scan(&events))
	require.Equal(t, 1, events)
	require.Contains(t, s.LogText(), "could not record the provider's answer yet; retrying")
}

// pgProxy forwards TCP between chargeonce and PostgreSQL and, when armed,
// cuts the connection that carries a chosen successful INSERT (or marked
// statement: the claim, the recording) once
// PostgreSQL is done with it (its ReadyForQuery), before the client hears
// that it completed. Outside a transaction the INSERT has then committed and
// only its reply is lost; inside one, the transaction dies with the
// connection.
type pgProxy struct {
	url      string // dbURL, through the proxy
	upstream string
	cuts     atomic.Int32

	mu     sync.Mutex
	armed  bool
	toPass int // INSERTs and marked statements still to let through before the cut
}

func startPGProxy(t *testing.T, dbURL string) *pgProxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &pgProxy{upstream: u.Host}
	// Without TLS, every message from the server has a type and a length.
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery, u.Host = q.Encode(), ln.Addr().String()
	p.url = u.String()
	var conns sync.WaitGroup
	done := make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { p.serve(c, done) })
		}
	}()
	t.Cleanup(func() { ln.Close(); close(done); conns.Wait() })
	return p
}

// cutInsertReply cuts the reply of the INSERT (or the claim, or the
// recording) that comes after pass others.
func (p *pgProxy) cutInsertReply(pass int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.toPass = true, pass
}

// cutThis reports whether the INSERT just completed is the one to cut.
func (p *pgProxy) cutThis() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		return false
	}
	if p.toPass > 0 {
		p.toPass--
		return false
	}
	p.armed = false
	return true
}

func (p *pgProxy) serve(client net.Conn, done <-chan struct{}) {
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		client.Close()
		return
	}
	closeBoth := sync.OnceFunc(func() { client.Close(); server.Close() })
	defer closeBoth()
	go func() { <-done; closeBoth() }()
	// The claim and the recording write in WITH clauses, so PostgreSQL
	// completes them as a SELECT: the client's side says which completion
	// is theirs.
	var markedNext atomic.Bool
	go func() { forwardNotingMarked(server, client, &markedNext); closeBoth() }()
	r := bufio.NewReader(server)
	var held []byte // the completion of an INSERT, while its commit is awaited
	for {
		msg, err := readMessage(r)
		if err != nil {
			return
		}
		if msg[0] == 'E' {
			markedNext.Store(false) // the statement failed: no completion is its
		}
		switch {
		case held == nil && msg[0] == 'C' && (strings.HasPrefix(string(msg[5:]), "INSERT 0 1") || markedNext.Swap(false)) && p.cutThis():
			held = msg
			continue
		case held != nil && msg[0] == 'Z':
			p.cuts.Add(1)
			return // the client hears nothing more
		case held != nil:
			continue
		}
		if _, err := client.Write(msg); err != nil {
			return
		}
	}
}

// markers are in the texts of the statements that write in WITH clauses:
// the claim (ClaimChargeAttempt) and the recording (RecordChargeSucceeded).
var markers = []string{"WITH claimed AS", "WITH done AS"}

func marked(query string) bool {
	return slices.ContainsFunc(markers, func(m string) bool { return strings.Contains(query, m) })
}

// forwardNotingMarked copies the client's messages to the server, and sets
// markedNext when one runs a marked statement, whose completion is then the
// next the server sends on the connection (pgx waits for a reply before it
// sends more). It knows the statement by its text in a Parse or a simple
// Query, and by the name of the statement it was prepared as in a Bind.
func forwardNotingMarked(server io.Writer, client io.Reader, markedNext *atomic.Bool) {
	r := bufio.NewReader(client)
	// The startup message has a length but no type.
	var length [4]byte
	if _, err := io.ReadFull(r, length[:]); err != nil {
		return
	}
	startup := make([]byte, binary.BigEndian.Uint32(length[:]))
	copy(startup, length[:])
	if _, err := io.ReadFull(r, startup[4:]); err != nil {
		return
	}
	if _, err := server.Write(startup); err != nil {
		return
	}
	markedStatements := map[string]bool{}
	for {
		msg, err := readMessage(r)
		if err != nil {
			return
		}
		fields := strings.Split(string(msg[5:]), "\x00")
		switch msg[0] {
		case 'P': // Parse: statement name, query
			if len(fields) > 1 && marked(fields[1]) {
				markedStatements[fields[0]] = true
			}
		case 'B': // Bind: portal, statement name
			if len(fields) > 1 && markedStatements[fields[1]] {
				markedNext.Store(true)
			}
		case 'Q':
			if marked(fields[0]) {
				markedNext.Store(true)
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// readMessage reads one protocol message: its type, its length, the rest.
func readMessage(r io.Reader) ([]byte, error) {
	header := make([]byte, 5)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, err
	}
	msg := make([]byte, 5+binary.BigEndian.Uint32(header[1:])-4)
	copy(msg, header)
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}
