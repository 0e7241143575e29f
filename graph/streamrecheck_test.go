package graph

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/cardsim/cardsimtest"
	"chargeonce/db/dbtest"
	"chargeonce/graph/graphtest"
	"chargeonce/live"
	"chargeonce/merchant"
	"chargeonce/payment"
	simprovider "chargeonce/provider/cardsim"
)

// A stream's key and origin, checked again: by each subscribe on a
// websocket, and by the passes of Streams.Run when no notification came.
// One handler on a real database and a real listener, with only the parts
// under test running: what refuses or closes comes from them.

type recheckBundle struct {
	pool      *pgxpool.Pool
	svc       *payment.Service
	merchants *merchant.Service
	url       string
}

// startRecheck serves /graphql with merchants and streams as given, and a
// hub that neither listens nor polls.
func startRecheck(t *testing.T, merchantCfg merchant.Config, streamsCfg StreamsConfig, runMerchants, runStreams bool) *recheckBundle {
	t.Helper()
	pool := dbtest.NewPool(t, cardsimtest.Schema)
	sim := cardsimtest.Start(t, pool, cardsimtest.Options{})
	svc := payment.NewService(pool, simprovider.New(sim.URL, 5*time.Second, nil), payment.Config{
		ProviderRetries: 1, ProviderRetryBudget: 20 * time.Millisecond,
	})
	merchants := merchant.NewWithConfig(pool, false, merchantCfg)
	hub := live.NewHub(pool, svc, live.Config{PollInterval: time.Hour})
	streams := NewStreams(streamsCfg)
	srv := httptest.NewServer(NewHandler(&Resolver{Payments: svc, Merchants: merchants, Live: hub}, HandlerConfig{Streams: streams}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	if runMerchants {
		merchants.OnChange(streams.Changed)
		go func() { merchants.Run(ctx); done <- struct{}{} }()
	} else {
		done <- struct{}{}
	}
	if runStreams {
		go func() { streams.Run(ctx); done <- struct{}{} }()
	} else {
		done <- struct{}{}
	}
	t.Cleanup(func() {
		streams.Close()
		hub.Close()
		srv.Close()
		cancel()
		<-done
		<-done
	})
	return &recheckBundle{pool: pool, svc: svc, merchants: merchants, url: srv.URL}
}

// processing leaves an attempt of m PROCESSING under key: the provider
// charged and its answer was lost.
func (b *recheckBundle) processing(t *testing.T, m payment.Merchant, key string) {
	t.Helper()
	r, err := b.svc.ChargeCard(context.Background(), m, key, payment.ChargeInput{Amount: 100, Currency: "USD", PaymentMethod: "pm_card_lostResponse"})
	require.NoError(t, err)
	require.Equal(t, payment.StatusProcessing, r.Status)
}

const recheckSubscription = `subscription Live($key: String!, $session: String) {
	chargeUpdated(idempotencyKey: $key, checkoutSession: $session) { status } }`

// requireClosed reads ws to its close, which must come with code, after
// nothing but complete messages.
func requireClosed(t *testing.T, ws *graphtest.WS, code websocket.StatusCode) {
	t.Helper()
	for {
		f, err := ws.Read(t)
		if err != nil {
			require.Equal(t, code, graphtest.CloseStatus(err), "%v", err)
			return
		}
		require.Equal(t, "complete", f.Type, "nothing more is served: %+v", f)
	}
}

func TestStreamOperations_KeyRevoked_TheNextSubscribeIsRefusedThenTheSocketCloses(t *testing.T) {
	t.Parallel()
	// No cache (the merchants do not Run: every key is read from the
	// database) and no re-check pass: only the subscribe can find out.
	b := startRecheck(t, merchant.Config{}, StreamsConfig{}, false, false)
	ctx := context.Background()
	shop, key, err := b.merchants.CreateAPIKey(ctx, "shop", merchant.KeySecret)
	require.NoError(t, err)
	b.processing(t, shop, "a")
	b.processing(t, shop, "b")

	ws := graphtest.DialWS(t, b.url, nil)
	ack, err := ws.Init(t, map[string]any{"authorization": "Bearer " + key})
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	ws.Subscribe(t, "1", recheckSubscription, map[string]any{"key": "a"})
	require.Equal(t, "PROCESSING", ws.Next(t, "1").Result.Status)

	_, err = b.merchants.RevokeAPIKey(ctx, key[:10])
	require.NoError(t, err)
	ws.Subscribe(t, "2", recheckSubscription, map[string]any{"key": "b"})
	refused := ws.Next(t, "2")
	require.Nil(t, refused.Result, "another charge is not served")
	require.Equal(t, "UNAUTHENTICATED", refused.Code(t))
	requireClosed(t, ws, 4403)
}

func TestStreamOperations_OriginRemoved_TheNextSubscribeIsRefusedThenTheSocketCloses(t *testing.T) {
	t.Parallel()
	b := startRecheck(t, merchant.Config{}, StreamsConfig{}, false, false)
	ctx := context.Background()
	shop, secretKey, err := b.merchants.CreateAPIKey(ctx, "shop", merchant.KeySecret)
	require.NoError(t, err)
	_, publishable, err := b.merchants.CreateAPIKey(ctx, "shop", merchant.KeyPublishable)
	require.NoError(t, err)
	const page = "https://shop.example"
	_, _, err = b.merchants.AddOrigin(ctx, "shop", page)
	require.NoError(t, err)
	session, err := b.svc.CreateCheckoutSession(ctx, shop, merchant.SessionSeed(secretKey), "cart-1", payment.SessionInput{Amount: 100, Currency: "USD"})
	require.NoError(t, err)
	r, err := b.svc.ChargeCheckoutSession(ctx, shop, payment.SessionKeys, "a", session.ClientSecret, payment.SessionCharge{PaymentMethod: "pm_card_lostResponse"})
	require.NoError(t, err)
	require.Equal(t, payment.StatusProcessing, r.Status)
	vars := map[string]any{"key": "a", "session": session.ClientSecret}

	ws := graphtest.DialWS(t, b.url, http.Header{"Origin": {page}})
	ack, err := ws.Init(t, map[string]any{"authorization": "Bearer " + publishable})
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	ws.Subscribe(t, "1", recheckSubscription, vars)
	require.Equal(t, "PROCESSING", ws.Next(t, "1").Result.Status)

	_, err = b.merchants.RemoveOrigin(ctx, "shop", page)
	require.NoError(t, err)
	ws.Subscribe(t, "2", recheckSubscription, vars)
	refused := ws.Next(t, "2")
	require.Nil(t, refused.Result)
	require.Equal(t, "FORBIDDEN", refused.Code(t))
	requireClosed(t, ws, 4403)
}

// revokeUnheard revokes key with the triggers off (session_replication_role
// replica): no notification tells any server.
func revokeUnheard(t *testing.T, pool *pgxpool.Pool, prefix string) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL session_replication_role = replica")
	require.NoError(t, err)
	tag, err := tx.Exec(ctx, "UPDATE api_keys SET revoked_at = now() WHERE key_prefix = $1", prefix)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	require.NoError(t, tx.Commit(ctx))
}

func TestStreams_RevokedWithoutANotification_ThePassClosesTheSocketWithinTheCacheTTL(t *testing.T) {
	t.Parallel()
	// A cache that serves a key for 2 s, passes every 200 ms: a revocation
	// that no notification tells is found once the key's cached
	// authentication would be too old by the next pass.
	b := startRecheck(t, merchant.Config{CacheTTL: 2 * time.Second}, StreamsConfig{RecheckInterval: 200 * time.Millisecond}, true, true)
	ctx := context.Background()
	shop, key, err := b.merchants.CreateAPIKey(ctx, "shop", merchant.KeySecret)
	require.NoError(t, err)
	b.processing(t, shop, "a")
	ws := graphtest.DialWS(t, b.url, http.Header{"Authorization": {"Bearer " + key}})
	ack, err := ws.Init(t, nil)
	require.NoError(t, err)
	require.Equal(t, "connection_ack", ack.Type)
	ws.Subscribe(t, "1", recheckSubscription, map[string]any{"key": "a"})
	require.Equal(t, "PROCESSING", ws.Next(t, "1").Result.Status)

	revokeUnheard(t, b.pool, key[:10])
	requireClosed(t, ws, 4403)
}
