package webhook

import (
	"bytes"
	"context"
	"errors"
	"go.opentelemetry.io/otel/propagation"
	"io"
	"net/http"
	"net/url"
	"time"

	"chargeonce/tracing"
)

// Results of an attempt, as the attempt duration metric labels them.
const (
	resultDelivered    = "delivered"     // a 2xx
	resultHTTPError    = "http_error"    // any other answer, 3xx included
	resultNetworkError = "network_error" // no answer: timeout, refused or broken connection
	resultRefused      = "refused"       // not sent: the URL or the address it reaches is refused (production)
)

// sent is the outcome of one HTTP attempt.
type sent struct {
	result string
	status int    // the answer's status; 0 without an answer
	err    string // why there was no answer, truncated
}

// Bounds of what an attempt keeps: the error text it records, and how much
// of an answer's body it reads (and discards) so the connection can be reused.
const (
	maxErrorText = 300
	maxDrain     = 64 << 10
)

// send POSTs d's body to its endpoint, signed at t, within Timeout.
func (s *Service) send(ctx context.Context, d delivery, t time.Time) sent {
	if _, err := CheckURL(d.url, s.cfg.Production); err != nil {
		return sent{result: resultRefused, err: truncate("not sent: " + err.Error())}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		return sent{result: resultRefused, err: truncate("not sent: " + err.Error())}
	}
	// traceparent: the merchant's handler joins the checkout's trace.
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(EventIDHeader, d.eventID.String())
	req.Header.Set(EventTypeHeader, d.eventType)
	req.Header.Set(SignatureHeader, Sign(string(d.secret), t, d.body))
	resp, err := s.client.Do(req)
	var forbidden *errForbiddenAddress
	switch {
	case errors.As(err, &forbidden):
		// Refused where it was dialled: no connection was made.
		return sent{result: resultRefused, err: truncate("not sent: " + forbidden.Error())}
	case err != nil:
		return sent{result: resultNetworkError, err: truncate(describe(ctx, err))}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return sent{result: resultDelivered, status: resp.StatusCode}
	}
	return sent{result: resultHTTPError, status: resp.StatusCode}
}

// describe says why a request got no answer, without its URL (which may
// hold a token of the merchant's).
func describe(ctx context.Context, err error) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "no answer within the timeout"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return err.Error()
}

func truncate(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	// Cut on a rune boundary: the column is text.
	cut := maxErrorText
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
