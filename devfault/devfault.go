// Package devfault injects network faults into chargeonce's HTTP responses on
// request, so that the web demo can show what a checkout does when the answer
// to a charge is lost on the way back: the server acted (the card is charged)
// but the client never learns it. It is for development only: server.go wires
// it only when APP_ENV is not production, and nothing else may use it.
package devfault

import (
	"bytes"
	"log/slog"
	"net/http"
	"strconv"
)

// Header is the request header that asks for a fault in the response to that
// one request.
const Header = "X-Chargeonce-Fault"

// DropResponse is the Header value that runs the handler to the end, then
// cuts the response after its status line and headers.
const DropResponse = "drop-response"

// Inject returns next with the faults that requests ask for in Header. A
// request without Header is served by next untouched; one with an unknown
// fault is refused with 400, so that a typo does not pass for a healthy
// network.
func Inject(next http.Handler, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch fault := r.Header.Get(Header); fault {
		case "":
			next.ServeHTTP(w, r)
		case DropResponse:
			dropResponse(w, r, next, log)
		default:
			http.Error(w, "unknown "+Header+" "+strconv.Quote(fault)+"; the only fault is "+DropResponse, http.StatusBadRequest)
		}
	})
}

// dropResponse serves r with next in full, then sends the status and headers
// with the body's real Content-Length and closes the connection before the
// body. The headers matter: had the connection closed before any byte of the
// response, a browser that sent the request on a reused keep-alive connection
// would take it for a stale connection and silently send the POST again,
// which hides the very error this fault is meant to show. Once headers have
// arrived, the truncated body is a network error the page must handle.
func dropResponse(w http.ResponseWriter, r *http.Request, next http.Handler, log *slog.Logger) {
	rec := &recorder{header: make(http.Header), status: http.StatusOK}
	next.ServeHTTP(rec, r)

	h := w.Header()
	for k, v := range rec.header {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(rec.body.Len()))
	h.Del("Transfer-Encoding")
	w.WriteHeader(rec.status)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		log.Warn("devfault: flush headers", "err", err)
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		// HTTP/2 streams cannot be hijacked: abort the stream instead, which
		// the client also sees as a network error.
		log.Info("devfault: dropping the response by aborting the stream", "path", r.URL.Path, "status", rec.status)
		panic(http.ErrAbortHandler)
	}
	log.Info("devfault: dropped the response after its headers", "path", r.URL.Path,
		"status", rec.status, "body_bytes", rec.body.Len())
	_ = conn.Close()
}

// recorder holds next's response so that its length is known before any of
// it is sent.
type recorder struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wroteHeader = true
	return r.body.Write(p)
}
