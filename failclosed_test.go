package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// TestDatabaseDown_ChargesNothingAndRecoversByItself stops chargeonce's real
// PostgreSQL: chargeCard and chargeStatus answer SERVICE_UNAVAILABLE with a
// retry hint (HTTP 503, Retry-After), nothing reaches the card provider, and
// /readyz is red; once PostgreSQL is back, /readyz turns green and the same
// key charges once, without restarting chargeonce.
func TestDatabaseDown_ChargesNothingAndRecoversByItself(t *testing.T) {
	t.Parallel()
	pg, dbURL := startOwnPostgres(t)
	// The provider keeps its state on the shared test server, which stays up.
	provider := startServer(t, dbtest.NewDatabase(t), nil)
	s := startServer(t, dbURL, map[string]string{"PROVIDER_URL": provider.URL + "/provider"})
	require.Equal(t, "SUCCEEDED", s.chargeCard(t, "demo-key", newKey(), visa(100)).Data.ChargeCard.Status)

	require.NoError(t, pg.Stop(context.Background()))
	key := newKey()
	for name, body := range map[string]map[string]any{
		"chargeCard":   {"query": chargeCardMutation, "variables": map[string]any{"key": key, "input": visa(1999)}},
		"chargeStatus": {"query": chargeStatusQuery, "variables": map[string]any{"key": key}},
	} {
		r := s.send(t, "POST", "/graphql", jsonHeaders("Authorization", "Bearer demo-key"), jsonBody(t, body))
		require.Equal(t, http.StatusServiceUnavailable, r.status, "%s: %s", name, r.body)
		require.NotEmpty(t, r.header.Get("Retry-After"), name)
		g := r.gql(t)
		require.Equal(t, "SERVICE_UNAVAILABLE", g.code(t), name)
		require.Positive(t, g.Errors[0].Extensions["retryAfterMs"], name)
		require.NotContains(t, g.Errors[0].Message, "127.0.0.1", "%s: no internals", name)
	}
	resp, err := s.client.Get(s.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "/readyz is red")
	require.Empty(t, provider.providerCharges(t, "demo", key), "nothing was charged")

	require.NoError(t, pg.Restart(context.Background()))
	require.Eventually(t, func() bool {
		resp, err := s.client.Get(s.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 15*time.Second, 50*time.Millisecond, "/readyz turns green by itself")
	p := s.chargeCard(t, "demo-key", key, visa(1999)).Data.ChargeCard
	require.Equal(t, "SUCCEEDED", p.Status)
	require.False(t, p.Replayed)
	require.Len(t, provider.providerCharges(t, "demo", key), 1)
	require.NotContains(t, s.logText(), "level=ERROR", "an outage is not a bug")
}

// TestChargeCard_ClaimReplyLost_RetryFinishesWithinASecond cuts chargeonce's
// connection to PostgreSQL right after the claim has committed and before its
// reply arrives: the request cannot know it holds the attempt, answers
// SERVICE_UNAVAILABLE, and gives the lease back. The client's retry then
// finds the attempt nobody holds, takes it over and charges at once, instead
// of waiting a whole lease (30 s here, with the reconciler off).
func TestChargeCard_ClaimReplyLost_RetryFinishesWithinASecond(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	proxy := startPGProxy(t, dbURL)
	s := startServer(t, proxy.url, map[string]string{"PROCESSING_LEASE": "30s", "RECONCILE_INTERVAL": "1h"})
	pool := openPool(t, dbURL) // around the proxy

	key := newKey()
	proxy.cutNextInsertReply()
	first := s.do(t, bearer("demo-key"), chargeCardMutation, map[string]any{"key": key, "input": visa(1999)})
	require.Equal(t, int32(1), proxy.cuts.Load(), "the claim's reply was cut")
	require.Equal(t, "SERVICE_UNAVAILABLE", first.code(t))

	var status string
	var leaseLeft time.Duration
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT status, greatest(locked_until - now(), interval '0') FROM charge_attempts WHERE idempotency_key = $1", key).Scan(&status, &leaseLeft))
	require.Equal(t, "PROCESSING", status, "the claim committed although its request never learned it")
	require.Zero(t, leaseLeft, "its lease was given back")
	require.Empty(t, s.providerCharges(t, "demo", key))

	start := time.Now()
	retry := s.chargeCard(t, "demo-key", key, visa(1999))
	took := time.Since(start)
	require.Empty(t, retry.Errors)
	require.Equal(t, "SUCCEEDED", retry.Data.ChargeCard.Status)
	require.Less(t, took, time.Second, "the retry finished the attempt at once")
	charges := s.providerCharges(t, "demo", key)
	require.Len(t, charges, 1)
	require.Equal(t, charges[0].ID, retry.Data.ChargeCard.Charge.ProviderChargeID)
	replay := s.chargeCard(t, "demo-key", key, visa(1999)).Data.ChargeCard
	require.True(t, replay.Replayed)
	require.Equal(t, retry.Data.ChargeCard.Charge.ID, replay.Charge.ID)
}

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return bytes.NewReader(b)
}

// pgProxy forwards TCP between chargeonce and PostgreSQL and, when armed,
// cuts the connection that carries the next successful INSERT after
// PostgreSQL has committed it (its ReadyForQuery) and before the client has
// any of the statement's completion: the commit happens, its reply is lost.
type pgProxy struct {
	url      string // dbURL, through the proxy
	upstream string
	armed    atomic.Bool
	cuts     atomic.Int32
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

func (p *pgProxy) cutNextInsertReply() { p.armed.Store(true) }

func (p *pgProxy) serve(client net.Conn, done <-chan struct{}) {
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		client.Close()
		return
	}
	closeBoth := sync.OnceFunc(func() { client.Close(); server.Close() })
	defer closeBoth()
	go func() { <-done; closeBoth() }()
	go func() { _, _ = io.Copy(server, client); closeBoth() }()
	r := bufio.NewReader(server)
	var held []byte // the completion of an INSERT, while its commit is awaited
	for {
		header := make([]byte, 5)
		if _, err := io.ReadFull(r, header); err != nil {
			return
		}
		msg := make([]byte, 5+binary.BigEndian.Uint32(header[1:])-4)
		copy(msg, header)
		if _, err := io.ReadFull(r, msg[5:]); err != nil {
			return
		}
		switch {
		case held == nil && msg[0] == 'C' && strings.HasPrefix(string(msg[5:]), "INSERT 0 1") && p.armed.Load():
			held = msg
			continue
		case held != nil && msg[0] == 'Z':
			if p.armed.CompareAndSwap(true, false) {
				p.cuts.Add(1)
				return // committed; the client hears nothing more
			}
			msg = append(held, msg...) // another connection took the cut
			held = nil
		case held != nil:
			held = append(held, msg...)
			continue
		}
		if _, err := client.Write(msg); err != nil {
			return
		}
	}
}
