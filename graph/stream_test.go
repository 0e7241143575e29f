package graph

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
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

func TestStreams_Close_EndsTheBoundStreamsAndEveryLaterOne(t *testing.T) {
	t.Parallel()
	var s Streams
	stream, release := s.bind(context.Background())
	defer release()
	kept, releaseKept := s.bind(context.Background())
	releaseKept()
	require.Error(t, kept.Err(), "a released stream's context ends")

	s.Close()
	require.Error(t, stream.Err(), "a bound stream ends with Close")
	late, releaseLate := s.bind(context.Background())
	defer releaseLate()
	require.Error(t, late.Err(), "a stream bound after Close ends at once")

	var none *Streams
	free, releaseFree := none.bind(context.Background())
	require.NoError(t, free.Err(), "without Streams, a stream lasts as long as its client")
	releaseFree()
}
