package main

import (
	"bytes"
	"chargeonce/internal/cli"
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

	"github.com/stretchr/testify/require"

	"chargeonce/db"
	"chargeonce/db/dbtest"
	"chargeonce/events/eventstest"
	"chargeonce/merchant"
	"chargeonce/payment"
	"chargeonce/webhook"
)

// webhookCommand runs `chargeonce webhook ARGS…` against dbURL, with env on
// top.
func webhookCommand(dbURL string, env map[string]string) func(args ...string) (string, error) {
	vars := map[string]string{"DATABASE_URL": dbURL}
	for k, v := range env {
		vars[k] = v
	}
	return func(args ...string) (string, error) {
		var out syncBuffer
		err := run(context.Background(), append([]string{"chargeonce", "webhook"}, args...),
			func(k string) string { return vars[k] }, &out, &out)
		return out.String(), err
	}
}

// printedSecret is the signing secret `webhook set` printed.
func printedSecret(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "whsec_") {
			return l
		}
	}
	t.Fatalf("no secret printed:\n%s", out)
	return ""
}

// TestWebhookCommands_SetReplaceListRemove walks an operator through an
// endpoint's life, and the refusals on the way.
func TestWebhookCommands_SetReplaceListRemove(t *testing.T) {
	t.Parallel()
	_, dbURL := setup(t) // a development server: the demo merchant exists
	command := webhookCommand(dbURL, nil)

	out, err := command("set", "demo", "http://127.0.0.1:8081/hooks")
	require.NoError(t, err)
	lines := strings.Split(out, "\n")
	require.Equal(t, "Registered the webhook endpoint of merchant demo: http://127.0.0.1:8081/hooks", lines[0])
	require.Equal(t, "Signing secret (shown once; give it to the receiver, which checks the Chargeonce-Signature header with it):", lines[1])
	first := printedSecret(t, out)
	require.Regexp(t, `^whsec_[A-Za-z0-9_-]{43}$`, first)

	out, err = command("set", "demo", "https://hooks.example.com/chargeonce")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "Replaced the webhook endpoint of merchant demo: https://hooks.example.com/chargeonce\n"), out)
	second := printedSecret(t, out)
	require.NotEqual(t, first, second, "a new secret every time")
	require.Contains(t, out, "The previous secret signs nothing from now on")

	out, err = command("list")
	require.NoError(t, err)
	require.NotContains(t, out, "whsec_", "never the secret")
	rows := listRows(t, out)
	require.Equal(t, []string{"MERCHANT", "URL", "CREATED", "UPDATED"}, rows[0])
	require.Len(t, rows, 2, out)
	require.Equal(t, []string{"demo", "https://hooks.example.com/chargeonce"}, rows[1][:2])
	_, err = time.Parse(time.RFC3339, rows[1][2])
	require.NoError(t, err)
	require.Contains(t, out, "1 webhook endpoint(s)")

	out, err = command("deliveries", "demo", "--limit", "5")
	require.NoError(t, err)
	require.Contains(t, out, "EVENT  TYPE  ATTEMPT  STARTED  DURATION  STATE  NEXT ATTEMPT  RESULT")
	require.Contains(t, out, "0 row(s)")

	out, err = command("remove", "demo")
	require.NoError(t, err)
	require.Equal(t, "Removed the webhook endpoint of merchant demo (https://hooks.example.com/chargeonce) and its delivery log; 0 pending deliveries will not be sent.\n", out)
	_, err = command("remove", "demo")
	require.ErrorIs(t, err, webhook.ErrNoEndpoint)
	require.ErrorContains(t, err, "merchant demo has no webhook endpoint; register one with `chargeonce webhook set demo URL`")
	_, err = command("deliveries", "demo")
	require.ErrorIs(t, err, webhook.ErrNoEndpoint)

	_, err = command("set", "nobody", "https://hooks.example.com/")
	require.ErrorContains(t, err, "no such merchant named nobody; create one with `chargeonce apikey create nobody`")
	for url, why := range map[string]string{
		"hooks.example.com/x":               "absolute http:// or https://",
		"https://user:pw@hooks.example.com": "credentials",
	} {
		_, err = command("set", "demo", url)
		require.ErrorIs(t, err, webhook.ErrInvalidURL)
		require.ErrorContains(t, err, why)
	}
	production := webhookCommand(dbURL, map[string]string{"APP_ENV": "production", "PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_0123456789abcdef",
		"NATS_URL": "nats://127.0.0.1:9"})
	_, err = production("set", "demo", "http://127.0.0.1:8081/hooks")
	require.ErrorContains(t, err, "invalid webhook URL: it must be https:// when APP_ENV=production")
	out, err = production("set", "demo", "https://hooks.example.com/chargeonce")
	require.NoError(t, err, out)

	for _, args := range [][]string{{}, {"set", "demo"}, {"list", "x"}, {"remove"}, {"deliveries"}, {"deliveries", "demo", "--limit"}, {"nope"}} {
		_, err = command(args...)
		require.ErrorIs(t, err, cli.ErrUsage, "%v", args)
	}
	_, err = command("deliveries", "demo", "--limit", "many")
	require.ErrorContains(t, err, "--limit must be a whole number from 1 to 10000")
}

// TestWebhooks_RealCharges_ReceiverVerifiesEachAndHandlesItOnce charges
// cards through the server, which relays its outbox to its own JetStream
// and delivers the webhooks itself, and has the README's receiver check
// every webhook with the secret `webhook set` printed. The first answer is lost once, so one event comes twice; the
// receiver handles it once.
func TestWebhooks_RealCharges_ReceiverVerifiesEachAndHandlesItOnce(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, dbURL, map[string]string{"NATS_URL": eventstest.New(t).URL()})
	command := webhookCommand(dbURL, nil)

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
	out, err := command("set", "demo", srv.URL+"/chargeonce")
	require.NoError(t, err)
	secret := printedSecret(t, out)
	var h http.Handler = webhookReceiver(secret, func(body []byte) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, body)
	})
	receiver.Store(&h)

	keys := []string{newKey(), newKey(), newKey()}
	for _, k := range keys {
		require.Equal(t, "SUCCEEDED", s.chargeCard(t, "demo-key", k, visa(1250)).Data.ChargeCard.Status)
	}
	declined := newKey()
	require.Equal(t, "FAILED", s.chargeCard(t, "demo-key", declined, withPaymentMethod("pm_card_chargeDeclined")).Data.ChargeCard.Status)
	pool, err := db.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		out, err = command("deliveries", "demo")
		require.NoError(t, err)
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
		require.Equal(t, merchant.ID, e.MerchantID)
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
	out, err = command("deliveries", "demo", "--limit=2")
	require.NoError(t, err)
	require.Contains(t, out, "2 row(s)")
	require.NotContains(t, s.logText(), secret, "the secret is never logged")

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
	readme, err := os.ReadFile("docs/events.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "```go\n"+code+"\n```", fmt.Sprintf("docs/events.md must quote webhook_receiver_test.go's receiver:\n%s", code))
}
