package systest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// The receiver that docs/events.md's "Webhooks" section shows merchants,
// kept here so that it compiles and is tested (TestWebhooks_…); that file
// quotes the lines between the markers verbatim
// (TestREADME_QuotesTheWebhookReceiver).

// README webhook receiver: begin
// webhookReceiver checks the signature and age of each chargeonce webhook,
// and hands each event to handle once, however often it is delivered.
func webhookReceiver(secret string, handle func(body []byte)) http.Handler {
	var handled sync.Map // event ids done; keep them in your database
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var t int64
		var sig string
		_, scanErr := fmt.Sscanf(r.Header.Get("Chargeonce-Signature"), "t=%d,v1=%s", &t, &sig)
		mac := hmac.New(sha256.New, []byte(secret))
		fmt.Fprintf(mac, "%d.%s", t, body)
		want := hex.EncodeToString(mac.Sum(nil))
		var event struct{ ID string }
		if err != nil || scanErr != nil || !hmac.Equal([]byte(sig), []byte(want)) ||
			time.Since(time.Unix(t, 0)).Abs() > 5*time.Minute || json.Unmarshal(body, &event) != nil {
			http.Error(w, "bad webhook", http.StatusBadRequest)
			return
		}
		if _, done := handled.LoadOrStore(event.ID, true); !done {
			handle(body) // e.g. mark the order paid
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// README webhook receiver: end
