package graph

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/payment"
)

func TestWantsEventStream_OnlyWhenNoJSONIsAccepted(t *testing.T) {
	t.Parallel()
	for accept, want := range map[string]bool{
		"text/event-stream":                   true,
		"text/event-stream; charset=utf-8":    true,
		"text/event-stream, text/plain;q=0.1": true,
		// urql, on every request: a query or a charge answers JSON.
		"application/graphql-response+json, application/graphql+json, application/json, text/event-stream, multipart/mixed": false,
		"application/json":  false,
		"*/*":               false,
		"":                  false,
		"not a media type,": false,
	} {
		require.Equal(t, want, wantsEventStream([]string{accept}), "Accept: %q", accept)
	}
	require.False(t, wantsEventStream([]string{"text/event-stream", "application/json"}), "over two headers too")
}

func TestStreamOf(t *testing.T) {
	t.Parallel()
	req := func(method string, h http.Header) *http.Request {
		r, err := http.NewRequest(method, "/graphql", nil)
		require.NoError(t, err)
		r.Header = h
		return r
	}
	require.Equal(t, streamWebsocket, streamOf(req(http.MethodGet, http.Header{"Upgrade": {"websocket"}})))
	require.Equal(t, streamSSE, streamOf(req(http.MethodPost, http.Header{"Accept": {"text/event-stream"}})))
	require.Equal(t, notStream, streamOf(req(http.MethodGet, http.Header{"Accept": {"text/event-stream"}})), "an event stream is a POST")
	require.Equal(t, notStream, streamOf(req(http.MethodPost, http.Header{"Accept": {"application/json"}})))
}

func TestStreams_Close_EndsTheOpenStreamsAndEveryLaterOne(t *testing.T) {
	t.Parallel()
	s := NewStreams(StreamsConfig{})
	st := &requestState{remote: "192.0.2.1"}
	stream, refused := s.open(context.Background(), st)
	require.Nil(t, refused)
	defer stream.release()
	kept, refused := s.open(context.Background(), st)
	require.Nil(t, refused)
	kept.release()
	require.Error(t, kept.ctx.Err(), "a released stream's context ends")

	s.Close()
	require.Error(t, stream.ctx.Err(), "an open stream ends with Close")
	require.Equal(t, endShutdown, *stream.ending, "with 1001: its client connects again")
	late, refused := s.open(context.Background(), st)
	require.Nil(t, refused)
	defer late.release()
	require.Error(t, late.ctx.Err(), "a stream opened after Close ends at once")
}

func TestStreams_PerAddressAndPerMerchant_CountOpenStreamsOnly(t *testing.T) {
	t.Parallel()
	s := NewStreams(StreamsConfig{MaxPerAddress: 2, MaxPerMerchant: 3})
	m := &payment.Merchant{ID: uuid.New(), Name: "shop"}
	open := func(remote string) (*streamConn, *streamRefusal) {
		c, refused := s.open(context.Background(), &requestState{remote: remote})
		if refused == nil {
			t.Cleanup(c.release)
		}
		return c, refused
	}
	a1, _ := open("192.0.2.1")
	a2, _ := open("192.0.2.1")
	_, refused := open("192.0.2.1")
	require.NotNil(t, refused, "a third from one address")
	require.Equal(t, "stream_address", refused.scope)
	require.Contains(t, refused.message, "this address holds 2 websockets and event streams open")
	b1, refused := open("192.0.2.2")
	require.Nil(t, refused, "another address has its own share")

	authenticated := &requestState{merchant: m}
	for _, c := range []*streamConn{a1, a2, b1} {
		require.Nil(t, s.admitMerchant(c, authenticated, false))
	}
	require.Nil(t, s.admitMerchant(a1, authenticated, false), "counted once per stream")
	c1, _ := open("192.0.2.3")
	refused = s.admitMerchant(c1, authenticated, false)
	require.NotNil(t, refused, "a fourth stream of the merchant")
	require.Equal(t, "stream_merchant", refused.scope)

	a2.release()
	a2.release() // twice is once
	_, refused = open("192.0.2.1")
	require.Nil(t, refused, "the address has room again")
	require.Nil(t, s.admitMerchant(c1, authenticated, false), "and the merchant")
}

func TestStreamConn_Subscriptions_BoundedAndGivenBackOnce(t *testing.T) {
	t.Parallel()
	s := NewStreams(StreamsConfig{MaxSubscriptions: 2})
	c, _ := s.open(context.Background(), &requestState{remote: "192.0.2.1"})
	defer c.release()
	first, ok := c.takeSubscription()
	require.True(t, ok)
	_, ok = c.takeSubscription()
	require.True(t, ok)
	_, ok = c.takeSubscription()
	require.False(t, ok, "a third at once")
	first()
	first()
	_, ok = c.takeSubscription()
	require.True(t, ok, "one back, once")
	_, ok = c.takeSubscription()
	require.False(t, ok)
}

func TestStreams_Lifetime_EndsTheStreamWithGoingAway(t *testing.T) {
	t.Parallel()
	s := NewStreams(StreamsConfig{MaxLifetime: 50 * time.Millisecond})
	c, _ := s.open(context.Background(), &requestState{remote: "192.0.2.1"})
	defer c.release()
	select {
	case <-c.ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the stream outlived its lifetime")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Equal(t, 1001, c.ending.code)
}

func TestLifetime_AtMostTheMaximum_AtLeastNineTenths(t *testing.T) {
	t.Parallel()
	for range 1000 {
		d := lifetime(time.Hour)
		require.LessOrEqual(t, d, time.Hour)
		require.GreaterOrEqual(t, d, 54*time.Minute)
	}
}
