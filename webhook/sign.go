package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// The headers of a webhook request.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>" (Sign).
	SignatureHeader = "Chargeonce-Signature"
	// EventIDHeader and EventTypeHeader repeat the body's id and type, so a
	// receiver can route or deduplicate before it parses the body.
	EventIDHeader   = "Chargeonce-Event-Id"
	EventTypeHeader = "Chargeonce-Event-Type"
)

// userAgent names chargeonce to receivers.
const userAgent = "chargeonce-webhook/1"

// Sign returns the Chargeonce-Signature of body sent at t:
// "t=<unix seconds>,v1=<lowercase hex HMAC-SHA256 keyed by the secret over
// "<t>.<body>">". The key is the whole secret as `webhook set` printed it.
// Each attempt is signed afresh with its own t, so a receiver can refuse
// old timestamps (a replay) and still accept a retry.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
