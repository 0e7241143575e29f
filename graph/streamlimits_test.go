package graph_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/graph/graphtest"
	"chargeonce/internal/apiclient"
	"chargeonce/merchant"
	"chargeonce/metrics/metricstest"
)

// The streams of /graphql as attackers use them, over a real listener and
// real sockets, each client address a different one of 127.0.0.0/8: a
// flood of subscriptions on one socket, floods of sockets, sockets held
// forever, and sockets whose key or page's origin was withdrawn.

const shopOrigin = "https://shop.example"

// waitingAttempt pays a fresh checkout session of the demo merchant with
// the publishable key and a card that needs 3-D Secure: its attempt stays
// PROCESSING until the shopper authenticates. The demo merchant must have
// registered shopOrigin.
func waitingAttempt(t *testing.T, s *apitest.Server) (key, secret string, action *apiclient.NextAction) {
	t.Helper()
	_, secret = s.OpenSession(t, apitest.SessionInput(4200, "returnUrl", shopOrigin+"/checkout/return"))
	key = apitest.NewKey()
	r := s.PaySession(t, key, secret, "pm_card_authenticationRequired", nil)
	require.Empty(t, r.Errors)
	require.Equal(t, "PROCESSING", r.Data.ChargeCard.Status)
	require.NotNil(t, r.Data.ChargeCard.NextAction)
	return key, secret, r.Data.ChargeCard.NextAction
}

// liveReads reads the count of attempts read by s's live status.
func liveReads(t *testing.T, s *apitest.Server) float64 {
	t.Helper()
	return metricstest.Scrape(t, s.Client, s.URL+"/metrics").Value("chargeonce_live_status_reads_total")
}

// initWS sends connection_init with apiKey, which must be accepted.
func initWS(t *testing.T, ws *graphtest.WS, apiKey string) {
	t.Helper()
	ack, err := ws.Init(t, map[string]any{"authorization": "Bearer " + apiKey})
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
}

// frameMessage decodes a next frame's GraphQL response.
func frameMessage(t *testing.T, f graphtest.Frame) (status string, errs []map[string]any) {
	t.Helper()
	var r struct {
		Data *struct {
			ChargeUpdated *struct {
				Status string `json:"status"`
			} `json:"chargeUpdated"`
		} `json:"data"`
		Errors []map[string]any `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(f.Payload, &r), "%s", f.Payload)
	if r.Data != nil && r.Data.ChargeUpdated != nil {
		status = r.Data.ChargeUpdated.Status
	}
	return status, r.Errors
}

func errorCode(e map[string]any) string {
	ext, _ := e["extensions"].(map[string]any)
	code, _ := ext["code"].(string)
	return code
}

// Row 6 of the public door: one socket, the public key, one session of its
// own waiting for 3-D Secure, 1,000 subscribes.
func TestStreams_ThousandSubscribesOnOneSocket_CappedWhileAShopperIsServed(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// No reconciler and no poll within the test: every read of an attempt
	// by the live status comes from a subscription or from a commit.
	s := apitest.ListenOn(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h", "LIVE_POLL_INTERVAL": "1h", "AUTHENTICATION_CHECK_INTERVAL": "1h"})
	_, _, err := merchant.New(dbtest.Open(t, dbURL), false).AddOrigin(context.Background(), "demo", shopOrigin)
	require.NoError(t, err)
	attackerKey, attackerSecret, action := waitingAttempt(t, s)
	shopperKey, shopperSecret, _ := waitingAttempt(t, s)
	// Listening already: no wake of every follower comes mid-test.
	require.Eventually(t, func() bool { return strings.Contains(s.LogText(), "live status: listening") }, graphtest.Within, 10*time.Millisecond)
	before := liveReads(t, s)

	attacker := graphtest.DialWSFrom(t, graphtest.ClientFrom("127.0.0.2"), s.URL, nil)
	initWS(t, attacker, apitest.PublishableKey)
	const subscribes = 1000
	vars := map[string]any{"key": attackerKey, "session": attackerSecret}
	for i := 1; i <= subscribes; i++ {
		attacker.Subscribe(t, strconv.Itoa(i), apitest.SessionUpdatesWithAction, vars)
	}
	served, refused, completed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for len(served)+len(refused) < subscribes || len(completed) < len(refused) {
		f, err := attacker.Read(t)
		require.NoError(t, err, "the socket stays up")
		switch f.Type {
		case "next":
			status, errs := frameMessage(t, f)
			if len(errs) == 0 {
				require.Equal(t, "PROCESSING", status)
				served[f.ID] = true
				continue
			}
			require.Len(t, errs, 1)
			require.Equal(t, "RATE_LIMITED", errorCode(errs[0]), "%v", errs[0])
			require.Contains(t, errs[0]["message"], "this websocket carries 5 subscriptions at once")
			refused[f.ID] = true
		case "complete":
			require.True(t, refused[f.ID], "only a refused subscription completes now: %s", f.ID)
			completed[f.ID] = true
		default:
			t.Fatalf("unexpected %+v", f)
		}
	}
	require.Equal(t, 5, len(served), "STREAM_MAX_SUBSCRIPTIONS, and LIVE_MAX_WATCHERS_PER_ATTEMPT")
	require.Equal(t, subscribes-5, len(refused))
	afterFlood := liveReads(t, s)
	// The subscribes served read the attempt only while no follower of it
	// existed (at most the five, when they race); the refused ones read
	// nothing.
	require.LessOrEqual(t, afterFlood-before, 5.0, "no read per subscribe")

	// A real shopper, from another address, follows its own attempt.
	shopper := graphtest.DialWSFrom(t, graphtest.ClientFrom("127.0.0.3"), s.URL, nil)
	initWS(t, shopper, apitest.PublishableKey)
	shopper.Subscribe(t, "1", apitest.SessionUpdatesWithAction, map[string]any{"key": shopperKey, "session": shopperSecret})
	m := shopper.Next(t, "1")
	require.Empty(t, m.Errors)
	require.Equal(t, "PROCESSING", m.Result.Status)

	// The attacker's attempt completes: all five hear it, for one read.
	beforeChange := liveReads(t, s)
	s.PressButton(t, action.Url, "complete")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, "SUCCEEDED", s.SessionStatus(t, apitest.PublishableKey, attackerKey, &attackerSecret).Data.ChargeStatus.Status)
	}, graphtest.Within, 100*time.Millisecond)
	succeeded, ended := map[string]bool{}, map[string]bool{}
	for len(ended) < len(served) {
		f, err := attacker.Read(t)
		require.NoError(t, err)
		require.True(t, served[f.ID], "%+v", f)
		switch f.Type {
		case "next":
			status, errs := frameMessage(t, f)
			require.Empty(t, errs)
			require.Equal(t, "SUCCEEDED", status)
			succeeded[f.ID] = true
		case "complete":
			require.True(t, succeeded[f.ID], "complete after the final state")
			ended[f.ID] = true
		}
	}
	changeReads := liveReads(t, s) - beforeChange
	t.Logf("live status reads: %v for %d subscribes, %v for the change heard by %d watchers", afterFlood-before, subscribes, changeReads, len(served))
	require.LessOrEqual(t, changeReads, 2.0, "one read per poke of the attempt, not one per watcher")
}

// Row 8 of the public door: keyless upgrades, each spending nothing.
func TestStreams_SixtyKeylessUpgrades_OnlyTheAddressBurstUpgrades(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Twenty tokens an address may spend, and hardly one back; the cap of
	// streams per address is not what this test is about.
	s := apitest.ListenOn(t, dbURL, map[string]string{"RATE_LIMIT_IP": "0.001", "RATE_LIMIT_IP_BURST": "20", "STREAM_MAX_PER_ADDRESS": "100"})
	attacker := graphtest.ClientFrom("127.0.0.4")

	const upgrades = 60
	type answer struct {
		ws      *graphtest.WS
		status  int
		body    []byte
		retry   string
		failure error
	}
	answers := make([]answer, upgrades)
	var wg sync.WaitGroup
	for i := range upgrades {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
			defer cancel()
			ws, refused, err := graphtest.TryDialWS(ctx, attacker, s.URL, nil)
			switch {
			case ws != nil:
				answers[i] = answer{ws: ws}
			case refused != nil:
				body, _ := io.ReadAll(refused.Body)
				answers[i] = answer{status: refused.StatusCode, body: body, retry: refused.Header.Get("Retry-After")}
			default:
				answers[i] = answer{failure: err}
			}
		})
	}
	wg.Wait()
	upgraded := 0
	for i, a := range answers {
		require.NoError(t, a.failure, "upgrade %d", i)
		if a.ws != nil {
			upgraded++
			_ = a.ws.CloseNow()
			continue
		}
		require.Equal(t, http.StatusTooManyRequests, a.status, "upgrade %d: %s", i, a.body)
		require.Equal(t, "RATE_LIMITED", apitest.RawResponse{Body: a.body}.GQL(t).Code(t))
		require.NotEmpty(t, a.retry)
	}
	require.Equal(t, 20, upgraded, "the address's burst, and not one more")

	// Another address upgrades, and its key is served.
	other := graphtest.DialWSFrom(t, graphtest.ClientFrom("127.0.0.5"), s.URL, nil)
	initWS(t, other, "demo-key")
}

// The publishable key is public: its streams are a browser's, and spend
// their address's tokens as keyless ones do. A secret key's are the
// merchant's server's, rationed by the merchant's limit.
func TestStreams_PublishableKeyStreams_SpendTheAddressTokens_SecretKeyStreamsDoNot(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.ListenOn(t, dbURL, map[string]string{"RATE_LIMIT_IP": "0.001", "RATE_LIMIT_IP_BURST": "3", "STREAM_MAX_PER_ADDRESS": "100"})
	from := graphtest.ClientFrom("127.0.0.15")
	dial := func(apiKey string) (*graphtest.WS, *http.Response) {
		ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
		defer cancel()
		ws, refused, err := graphtest.TryDialWS(ctx, from, s.URL, http.Header{"Authorization": {"Bearer " + apiKey}})
		if ws != nil {
			t.Cleanup(func() { _ = ws.CloseNow() })
			return ws, nil
		}
		require.NotNil(t, refused, "%v", err)
		return nil, refused
	}
	// The merchant's server's sockets, more than the address's burst:
	// they spend none of its tokens...
	for range 5 {
		ws, _ := dial("demo-key")
		require.NotNil(t, ws, "the merchant's server")
		ack, err := ws.Init(t, nil)
		require.NoError(t, err)
		require.Equal(t, "connection_ack", ack.Type)
	}
	// ... which its browser streams spend, one each.
	for i := range 3 {
		ws, refused := dial(apitest.PublishableKey)
		require.NotNil(t, ws, "stream %d: within the burst (HTTP %v)", i, refused)
	}
	_, refused := dial(apitest.PublishableKey)
	require.NotNil(t, refused)
	require.Equal(t, http.StatusTooManyRequests, refused.StatusCode)
	body, _ := io.ReadAll(refused.Body)
	r := apitest.RawResponse{Body: body}.GQL(t)
	require.Equal(t, "RATE_LIMITED", r.Code(t))
	require.Contains(t, r.Errors[0].Message, "browser streams from this address")
}

// Row 8 of the public door: authenticated sockets held open, as many as an
// address likes.
func TestStreams_PerAddress_RefusedBeforeTheUpgrade_AnotherAddressConnects(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Tokens are not what this test is about.
	s := apitest.ListenOn(t, dbURL, map[string]string{"RATE_LIMIT_IP_BURST": "1000", "RECONCILE_INTERVAL": "1h"})
	key, _ := apitest.ProcessingAttempt(t, s)
	attacker := graphtest.ClientFrom("127.0.0.6")
	withKey := http.Header{"Authorization": {"Bearer demo-key"}}

	const sockets = 60
	open := make([]*graphtest.WS, sockets)
	statuses := make([]int, sockets)
	bodies := make([][]byte, sockets)
	var wg sync.WaitGroup
	for i := range sockets {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
			defer cancel()
			ws, refused, err := graphtest.TryDialWS(ctx, attacker, s.URL, withKey)
			switch {
			case ws != nil:
				open[i] = ws
			case refused != nil:
				statuses[i] = refused.StatusCode
				bodies[i], _ = io.ReadAll(refused.Body)
			default:
				statuses[i] = -1
				bodies[i] = []byte(err.Error())
			}
		})
	}
	wg.Wait()
	var held []*graphtest.WS
	for i := range sockets {
		if open[i] != nil {
			t.Cleanup(func() { _ = open[i].CloseNow() })
			held = append(held, open[i])
			continue
		}
		require.Equal(t, http.StatusTooManyRequests, statuses[i], "%s", bodies[i])
		r := apitest.RawResponse{Body: bodies[i]}.GQL(t)
		require.Equal(t, "RATE_LIMITED", r.Code(t))
		require.Contains(t, r.Errors[0].Message, "this address holds 20 websockets and event streams open")
	}
	require.Equal(t, 20, len(held), "STREAM_MAX_PER_ADDRESS")
	for _, ws := range held {
		ack, err := ws.Init(t, nil)
		require.NoError(t, err)
		require.Equal(t, "connection_ack", ack.Type, "the ones admitted are served")
	}

	// Another address connects and is served, over both transports.
	shopper := graphtest.ClientFrom("127.0.0.7")
	ws := graphtest.DialWSFrom(t, shopper, s.URL, nil)
	initWS(t, ws, "demo-key")
	ws.Subscribe(t, "1", apitest.ChargeUpdatedSubscription, map[string]any{"key": key})
	require.Equal(t, "PROCESSING", ws.Next(t, "1").Result.Status)
	sse := graphtest.SubscribeSSE(t, shopper, s.URL, "demo-key", key)
	require.Equal(t, "PROCESSING", sse.MustNext(t).Result.Status)

	// A socket the attacker closes makes room for one more, and only one.
	_ = held[0].CloseNow()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
		defer cancel()
		ws, _, err := graphtest.TryDialWS(ctx, attacker, s.URL, withKey)
		require.NoError(c, err)
		t.Cleanup(func() { _ = ws.CloseNow() })
	}, graphtest.Within, 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
	defer cancel()
	_, refused, err := graphtest.TryDialWS(ctx, attacker, s.URL, withKey)
	require.Error(t, err)
	require.NotNil(t, refused)
	require.Equal(t, http.StatusTooManyRequests, refused.StatusCode)
}

func TestStreams_PerMerchant_RefusedAtTheUpgradeOrAtConnectionInit(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.ListenOn(t, dbURL, map[string]string{"STREAM_MAX_PER_MERCHANT": "2", "RECONCILE_INTERVAL": "1h"})
	_, acmeKey, err := merchant.New(dbtest.Open(t, dbURL), false).CreateAPIKey(context.Background(), "acme", merchant.KeySecret)
	require.NoError(t, err)
	key, _ := apitest.ProcessingAttempt(t, s)
	withKey := http.Header{"Authorization": {"Bearer demo-key"}}

	// Two streams of the demo merchant, from two addresses, one per way of
	// sending the key.
	first := graphtest.DialWSFrom(t, graphtest.ClientFrom("127.0.0.8"), s.URL, withKey)
	ack, err := first.Init(t, nil)
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	second := graphtest.DialWSFrom(t, graphtest.ClientFrom("127.0.0.9"), s.URL, nil)
	initWS(t, second, "demo-key")

	// A third: refused at the upgrade when its key is in the header...
	ctx, cancel := context.WithTimeout(context.Background(), graphtest.Within)
	defer cancel()
	_, refused, err := graphtest.TryDialWS(ctx, graphtest.ClientFrom("127.0.0.10"), s.URL, withKey)
	require.Error(t, err)
	require.NotNil(t, refused)
	require.Equal(t, http.StatusTooManyRequests, refused.StatusCode)
	body, _ := io.ReadAll(refused.Body)
	require.Contains(t, apitest.RawResponse{Body: body}.GQL(t).Errors[0].Message, "this merchant holds 2 websockets and event streams open")
	// ... closed with 4429 at its connection_init otherwise...
	third := graphtest.DialWSFrom(t, graphtest.ClientFrom("127.0.0.11"), s.URL, nil)
	_, err = third.Init(t, map[string]any{"authorization": "Bearer demo-key"})
	require.Equal(t, websocket.StatusCode(4429), graphtest.CloseStatus(err), "%v", err)
	// ... and an event stream is a 429 before it starts.
	resp, _ := graphtest.PostSSE(t, graphtest.ClientFrom("127.0.0.12"), s.URL, apitest.Bearer("demo-key"), apitest.ChargeUpdatedSubscription, map[string]any{"key": key})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	// Another merchant has its own share.
	acme := graphtest.DialWSFrom(t, graphtest.ClientFrom("127.0.0.13"), s.URL, nil)
	initWS(t, acme, acmeKey)

	// A stream that ends makes room.
	_ = first.CloseNow()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		sse := graphtest.ClientFrom("127.0.0.14")
		resp, cancel := graphtest.PostSSE(t, sse, s.URL, apitest.Bearer("demo-key"), apitest.ChargeUpdatedSubscription, map[string]any{"key": key})
		defer cancel()
		require.Equal(c, http.StatusOK, resp.StatusCode)
	}, graphtest.Within, 20*time.Millisecond)
}

func TestStreams_Lifetime_ClosedWithGoingAway_TheClientConnectsAgain(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := apitest.ListenOn(t, dbURL, map[string]string{"STREAM_MAX_LIFETIME": "2s", "RECONCILE_INTERVAL": "1h"})
	key, _ := apitest.ProcessingAttempt(t, s)

	ws := graphtest.SubscribeWS(t, s.URL, "demo-key", key)
	require.Equal(t, "PROCESSING", ws.Next(t, "1").Result.Status)
	sse := graphtest.SubscribeSSE(t, s.Client, s.URL, "demo-key", key)
	require.Equal(t, "PROCESSING", sse.MustNext(t).Result.Status)

	// An idle socket does not live forever: it is closed with 1001 (Going
	// Away), which graphql-transport-ws clients answer by connecting again.
	_, err := ws.Read(t)
	require.Error(t, err)
	require.Equal(t, websocket.StatusGoingAway, graphtest.CloseStatus(err), "%v", err)
	_, err = sse.Next(t)
	require.ErrorIs(t, err, io.EOF, "the event stream ends without complete: its client asks again")

	again := graphtest.SubscribeWS(t, s.URL, "demo-key", key)
	require.Equal(t, "PROCESSING", again.Next(t, "1").Result.Status, "connected again, and served")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := metricstest.Scrape(c, s.Client, s.URL+"/metrics")
		require.GreaterOrEqual(c, m.Value("chargeonce_streams_ended_total", "reason", "lifetime"), 2.0)
		require.Equal(c, 0.0, m.Value("chargeonce_streams_ended_total", "reason", "revoked"))
	}, graphtest.Within, 20*time.Millisecond)
}

// Row 7 of the public door: a key revoked, an origin removed, while
// streams with them are open on another instance.
func TestStreams_KeyRevokedOnAnotherInstance_ItsStreamsCloseWith4403(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Instance A serves the streams; its periodic re-check is an hour
	// away, so what closes them is the revocation's notification.
	a := apitest.ListenOn(t, dbURL, map[string]string{"STREAM_RECHECK_INTERVAL": "1h", "RECONCILE_INTERVAL": "1h"})
	// Instance B's merchant service, as the CLI's `apikey revoke` uses it.
	b := merchant.New(dbtest.Open(t, dbURL), false)
	_, acmeKey, err := b.CreateAPIKey(context.Background(), "acme", merchant.KeySecret)
	require.NoError(t, err)
	_, survivorKey, err := b.CreateAPIKey(context.Background(), "acme", merchant.KeySecret)
	require.NoError(t, err)
	watched, other := apitest.NewKey(), apitest.NewKey()
	for _, k := range []string{watched, other} {
		require.Equal(t, "PROCESSING", a.ChargeCard(t, acmeKey, k, apitest.WithPaymentMethod("pm_card_lostResponse")).Data.ChargeCard.Status)
	}

	ws := graphtest.SubscribeWS(t, a.URL, acmeKey, watched)
	require.Equal(t, "PROCESSING", ws.Next(t, "1").Result.Status)
	sse := graphtest.SubscribeSSE(t, a.Client, a.URL, acmeKey, watched)
	require.Equal(t, "PROCESSING", sse.MustNext(t).Result.Status)
	kept := graphtest.SubscribeWS(t, a.URL, survivorKey, watched)
	require.Equal(t, "PROCESSING", kept.Next(t, "1").Result.Status)

	_, err = b.RevokeAPIKey(context.Background(), acmeKey[:10])
	require.NoError(t, err)
	// Within graphtest.Within (30 s), the socket closes with 4403 and the
	// event stream ends; no sleep: each read waits for its end.
	for {
		f, err := ws.Read(t)
		if err != nil {
			require.Equal(t, websocket.StatusCode(4403), graphtest.CloseStatus(err), "%v", err)
			break
		}
		require.NotEqual(t, "next", f.Type, "nothing more is served: %+v", f)
	}
	_, err = sse.Next(t)
	require.ErrorIs(t, err, io.EOF)
	// A new socket with the key is refused at its init.
	again := graphtest.DialWS(t, a.URL, nil)
	_, err = again.Init(t, map[string]any{"authorization": "Bearer " + acmeKey})
	require.Equal(t, websocket.StatusCode(4403), graphtest.CloseStatus(err))

	// The merchant's other key, not revoked, keeps its socket: it carries a
	// new subscription.
	kept.Subscribe(t, "2", apitest.ChargeUpdatedSubscription, map[string]any{"key": other})
	require.Equal(t, "PROCESSING", kept.Next(t, "2").Result.Status)
	require.Contains(t, a.LogText(), "stream ended: the API key of this stream no longer authenticates")
	require.NotContains(t, a.LogText(), acmeKey, "no key in any log line")
	m := metricstest.Scrape(t, a.Client, a.URL+"/metrics")
	require.Equal(t, 2.0, m.Value("chargeonce_streams_ended_total", "reason", "revoked"))
}

func TestStreams_OriginRemovedOnAnotherInstance_ItsStreamsCloseWith4403(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	a := apitest.ListenOn(t, dbURL, map[string]string{"STREAM_RECHECK_INTERVAL": "1h", "RECONCILE_INTERVAL": "1h", "AUTHENTICATION_CHECK_INTERVAL": "1h"})
	b := merchant.New(dbtest.Open(t, dbURL), false)
	const other = "https://other.example"
	for _, o := range []string{shopOrigin, other} {
		_, _, err := b.AddOrigin(context.Background(), "demo", o)
		require.NoError(t, err)
	}
	key, secret, _ := waitingAttempt(t, a)
	vars := map[string]any{"key": key, "session": secret}

	// The checkout page's streams, opened from its origin with the
	// publishable key.
	ws := graphtest.DialWS(t, a.URL, http.Header{"Origin": {shopOrigin}})
	initWS(t, ws, apitest.PublishableKey)
	ws.Subscribe(t, "1", apitest.SessionUpdatesWithAction, vars)
	require.Equal(t, "PROCESSING", ws.Next(t, "1").Result.Status)
	resp, _ := graphtest.PostSSE(t, a.Client, a.URL, map[string]string{"Authorization": "Bearer " + apitest.PublishableKey, "Origin": shopOrigin},
		apitest.SessionUpdatesWithAction, vars)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sse := graphtest.NewSSE(resp)
	require.Equal(t, "PROCESSING", sse.MustNext(t).Result.Status)
	// A page of the origin that stays registered.
	kept := graphtest.DialWS(t, a.URL, http.Header{"Origin": {other}})
	initWS(t, kept, apitest.PublishableKey)

	_, err := b.RemoveOrigin(context.Background(), "demo", shopOrigin)
	require.NoError(t, err)
	for {
		f, err := ws.Read(t)
		if err != nil {
			require.Equal(t, websocket.StatusCode(4403), graphtest.CloseStatus(err), "%v", err)
			break
		}
		require.NotEqual(t, "next", f.Type, "nothing more is served: %+v", f)
	}
	_, err = sse.Next(t)
	require.ErrorIs(t, err, io.EOF)

	kept.Subscribe(t, "1", apitest.SessionUpdatesWithAction, vars)
	require.Equal(t, "PROCESSING", kept.Next(t, "1").Result.Status, "the other origin's page is still served")
	require.Contains(t, a.LogText(), "stream ended: this page's origin is no longer registered")
}
