package graph_test

import (
	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/merchant"
	"chargeonce/metrics/metricstest"
	"chargeonce/provider/stripe/stripefake"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuth_OnlyALiveKeyOfTheEnvironmentCharges(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	dbURL := s.DatabaseURL
	tests := map[string]map[string]string{
		"no header":      nil,
		"unknown key":    apitest.Bearer("not-a-key"),
		"other scheme":   {"Authorization": "Basic ZGVtbzpkZW1vLWtleQ=="},
		"bearer, no key": {"Authorization": "Bearer "},
	}
	for name, headers := range tests {
		key := apitest.NewKey()
		r := s.Do(t, headers, apitest.ChargeCardMutation, map[string]any{"key": key, "input": apitest.Visa(100)})
		require.Equal(t, "UNAUTHENTICATED", r.Code(t), name)
		r = s.Do(t, headers, apitest.ChargeStatusQuery, map[string]any{"key": key})
		require.Equal(t, "UNAUTHENTICATED", r.Code(t), name)
		require.Empty(t, s.ProviderCharges(t, "demo", key), name)
	}

	// A key made as `chargeonce apikey create` makes one works, and is
	// stored only as its hash (systest's TestAPIKeyCommands_… runs the
	// command itself).
	_, apiKey, err := merchant.New(dbtest.Open(t, dbURL), false).CreateAPIKey(context.Background(), "shop", merchant.KeySecret)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(apiKey, "co_sk_"), apiKey)
	r := s.ChargeCard(t, apiKey, apitest.NewKey(), apitest.Visa(100))
	require.Empty(t, r.Errors)
	require.Equal(t, "SUCCEEDED", r.Data.ChargeCard.Status)
	pool := dbtest.Open(t, dbURL)
	var hashed, clear int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FILTER (WHERE key_hash = sha256(convert_to($1::text, 'UTF8'))), count(*) FILTER (WHERE key_prefix = $1::text) FROM api_keys",
		apiKey).Scan(&hashed, &clear))
	require.Equal(t, 1, hashed, "the key is stored hashed")
	require.Zero(t, clear, "the key is never stored in clear")

	// Production refuses the development-only demo key, even though it is in the database.
	prod := apitest.StartOn(t, dbURL, stripefake.Start(t).Env(map[string]string{"APP_ENV": "production"}))
	require.Equal(t, "UNAUTHENTICATED", prod.ChargeCard(t, "demo-key", apitest.NewKey(), apitest.Visa(100)).Code(t))
	require.Equal(t, "SUCCEEDED", prod.ChargeCard(t, apiKey, apitest.NewKey(), apitest.Visa(100)).Data.ChargeCard.Status)

	// Development aids do not exist in production: the fault switch is
	// ignored, and there is no playground, simulator or demo page.
	dropped := prod.Do(t, map[string]string{"Authorization": "Bearer " + apiKey, "X-Chargeonce-Fault": "drop-response"},
		apitest.ChargeCardMutation, map[string]any{"key": apitest.NewKey(), "input": apitest.Visa(100)})
	require.Empty(t, dropped.Errors)
	require.Equal(t, "SUCCEEDED", dropped.Data.ChargeCard.Status, "the answer arrives whole")
	for _, path := range []string{"/playground", "/provider/v1/charges", "/"} {
		resp, err := prod.Client.Get(prod.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
}

// TestAuthCache_RepeatedKey_IsServedFromTheCache checks that a server runs
// the API key cache's listener: once it listens, a key it has seen is
// answered without the database.
func TestAuthCache_RepeatedKey_IsServedFromTheCache(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	hits := func(t require.TestingT) float64 {
		return metricstest.Scrape(t, s.Client, s.URL+"/metrics").Value("chargeonce_auth_cache_total", "result", "hit")
	}
	require.Zero(t, hits(t))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, s.ChargeStatus(c, "demo-key", apitest.NewKey()).Data.ChargeStatus)
		require.Positive(c, hits(c))
	}, 10*time.Second, 20*time.Millisecond, "the listener starts with the server; the cache answers from then on")
}
