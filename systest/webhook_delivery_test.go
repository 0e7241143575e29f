package systest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/events/eventstest"
	"chargeonce/internal/apiclient"
	"chargeonce/merchant"
	"chargeonce/payment"
	"chargeonce/webhook"
)

// TestWebhooks_RealCharges_ReceiverVerifiesEachAndHandlesItOnce charges
// cards through the server, which relays its outbox to its own JetStream
// and delivers the webhooks itself, and has the README's receiver check
// every webhook with the secret `webhook set` printed. The first answer
// is lost once, so one event comes twice; the receiver handles it once.
// The server and the commands are processes.
func TestWebhooks_RealCharges_ReceiverVerifiesEachAndHandlesItOnce(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL, "NATS_URL": eventstest.New(t).URL()})
	command := webhookCommand(t, dbURL, nil)

	var receiver atomic.Pointer[http.Handler]
	var mu sync.Mutex
	var handled [][]byte
	var requests, lost atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		rec := httptest.NewRecorder()
		(*receiver.Load()).ServeHTTP(rec, r)
		if rec.Code == http.StatusNoContent && lost.CompareAndSwap(0, 1) {
			// Handled, but the answer never reaches chargeonce: it sends again.
			http.Error(w, "lost", http.StatusBadGateway)
			return
		}
		w.WriteHeader(rec.Code)
	}))
	t.Cleanup(srv.Close)
	set := command("set", "demo", srv.URL+"/chargeonce")
	set.requireOK(t)
	secret := printedSecret(t, set.stdout)
	var h http.Handler = webhookReceiver(secret, func(body []byte) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, body)
	})
	receiver.Store(&h)

	keys := []string{newKey(), newKey(), newKey()}
	for _, k := range keys {
		require.Equal(t, "SUCCEEDED", s.chargeCard(t, "demo-key", k, visa(1250)).Status)
	}
	declined := newKey()
	require.Equal(t, "FAILED", s.chargeCard(t, "demo-key", declined, withPaymentMethod("pm_card_chargeDeclined")).Status)
	pool := dbtest.Open(t, dbURL)

	var out string
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		deliveries := command("deliveries", "demo")
		deliveries.requireOK(t)
		out = deliveries.stdout
		if n == 4 && strings.Count(out, " delivered ") == 5 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not every event handled within 60s: %d handled, log:\n%s", n, out)
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, int32(5), requests.Load(), "four events, one of them twice")

	mu.Lock()
	defer mu.Unlock()
	merchant, err := merchant.New(pool, true).Authenticate(context.Background(), "demo-key")
	require.NoError(t, err)
	byKey := map[string]payment.Event{}
	for _, body := range handled {
		e, err := payment.ParseEvent(body)
		require.NoError(t, err)
		require.Equal(t, merchant.Merchant.ID, e.MerchantID)
		byKey[e.IdempotencyKey] = e
	}
	require.Len(t, byKey, 4, "each event handled once")
	for _, k := range keys {
		require.Equal(t, payment.EventChargeSucceeded, byKey[k].Type)
		require.Equal(t, int64(1250), byKey[k].Amount)
		require.NotNil(t, byKey[k].Charge)
	}
	require.Equal(t, payment.EventChargeFailed, byKey[declined].Type)
	require.Equal(t, "card_declined", byKey[declined].Failure.Code)

	// The delivery log: five attempts, one of them answered 502.
	require.True(t, strings.HasPrefix(out, "Deliveries to the webhook endpoint of merchant demo ("+srv.URL+"/chargeonce), newest first:\n"), out)
	rows := listRows(t, strings.SplitN(out, "\n", 2)[1])
	require.Equal(t, []string{"EVENT", "TYPE", "ATTEMPT", "STARTED", "DURATION", "STATE", "NEXT", "ATTEMPT", "RESULT"}, rows[0])
	require.Len(t, rows, 6, out)
	results := map[string]int{}
	for _, r := range rows[1:] {
		require.Equal(t, "delivered", r[5])
		require.Equal(t, "-", r[6], "nothing is due next")
		_, err := time.Parse(time.RFC3339, r[3])
		require.NoError(t, err)
		_, err = time.ParseDuration(r[4])
		require.NoError(t, err)
		results[r[2]+" "+strings.Join(r[7:], " ")]++
	}
	require.Equal(t, map[string]int{"1 HTTP 204": 3, "1 HTTP 502": 1, "2 HTTP 204": 1}, results)
	require.Contains(t, out, "5 row(s)")
	limited := command("deliveries", "demo", "--limit=2")
	limited.requireOK(t)
	require.Contains(t, limited.stdout, "2 row(s)")
	require.NotContains(t, s.Output(), secret, "the secret is never logged")

	// The receiver refuses what chargeonce did not sign, or signed long ago.
	body := handled[0]
	for name, sig := range map[string]string{
		"unsigned":        "",
		"another secret":  webhook.Sign("whsec_other", time.Now(), body),
		"ten minutes old": webhook.Sign(secret, time.Now().Add(-10*time.Minute), body),
		"malformed":       "t=now,v1=" + strconv.Itoa(42),
	} {
		req := httptest.NewRequest(http.MethodPost, "/chargeonce", bytes.NewReader(body))
		req.Header.Set(webhook.SignatureHeader, sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusBadRequest, rec.Code, name)
	}
	require.Len(t, handled, 4)

	// Each key's history shows its event written, published and delivered:
	// the one whose answer was lost, attempted twice, 502 then 204.
	attempts := map[string]int{}
	for _, k := range append(keys, declined) {
		var rows []apiclient.HistoryRow
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var err error
			rows, err = s.demo().History(t.Context(), apiclient.AttemptKindCharge, k)
			require.NoError(c, err)
			require.NotEmpty(c, historyOf(rows, "webhook.attempted"))
		}, 10*time.Second, 50*time.Millisecond)
		require.Len(t, historyOf(rows, "event.written"), 1, k)
		require.Len(t, historyOf(rows, "event.published"), 1, k)
		tried := historyOf(rows, "webhook.attempted")
		var results []string
		for _, r := range tried {
			require.NotContains(t, *r.Detail, srv.URL, "never the endpoint's address")
			_, result, _ := strings.Cut(*r.Detail, ": ")
			results = append(results, strings.Fields(result)[0]+" "+strings.Fields(result)[1])
		}
		attempts[strings.Join(results, ", ")]++
	}
	require.Equal(t, map[string]int{"HTTP 204": 3, "HTTP 502, HTTP 204": 1}, attempts)
	requireHistoryHoldsNone(t, pool, map[string]string{"the signing secret": secret, "the API key": "demo-key", "a card token": "pm_card_"})
}

// historyOf are the rows of rows of type typ.
func historyOf(rows []apiclient.HistoryRow, typ string) []apiclient.HistoryRow {
	var out []apiclient.HistoryRow
	for _, r := range rows {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// requireHistoryHoldsNone requires that no history row of the database
// holds any of secrets, whatever its column.
func requireHistoryHoldsNone(t *testing.T, pool *pgxpool.Pool, secrets map[string]string) {
	t.Helper()
	rows := dbtest.Query[string](t, pool, "SELECT row_to_json(h)::text FROM attempt_history h")
	require.NotEmpty(t, rows)
	all := strings.Join(rows, "\n")
	for name, secret := range secrets {
		require.NotContains(t, all, secret, "the history never holds %s", name)
	}
}

// TestREADME_QuotesTheWebhookReceiver keeps the receiver in docs/events.md
// the one that TestWebhooks_RealCharges_… runs.
func TestREADME_QuotesTheWebhookReceiver(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("webhook_receiver_test.go")
	require.NoError(t, err)
	begin, end := "// README webhook receiver: begin\n", "\n// README webhook receiver: end"
	_, rest, ok := strings.Cut(string(src), begin)
	require.True(t, ok, "no begin marker")
	code, _, ok := strings.Cut(rest, end)
	require.True(t, ok, "no end marker")
	code = strings.TrimSpace(code)
	readme, err := os.ReadFile("../docs/events.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "```go\n"+code+"\n```", fmt.Sprintf("docs/events.md must quote webhook_receiver_test.go's receiver:\n%s", code))
}
