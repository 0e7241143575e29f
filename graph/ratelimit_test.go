package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
)

// TestRateLimit_HoldsUnderLoadAndNeverChargesTwice drives one merchant well
// past its limit from 16 concurrent clients on loopback: the server admits
// no more than the bucket allows, answers the rest RATE_LIMITED with a retry
// hint (HTTP 429, Retry-After) without claiming their keys, and every
// admitted key is charged exactly once. A refused key, retried after the
// hint, charges once.
func TestRateLimit_HoldsUnderLoadAndNeverChargesTwice(t *testing.T) {
	t.Parallel()
	const (
		perSecond = 20
		burst     = 10
		workers   = 16
		duration  = 1500 * time.Millisecond
	)
	dbURL := dbtest.NewDatabase(t)
	s := apitest.StartOn(t, dbURL, map[string]string{
		"RATE_LIMIT_MERCHANT": strconv.Itoa(perSecond), "RATE_LIMIT_MERCHANT_BURST": strconv.Itoa(burst),
	})
	pool := dbtest.Open(t, dbURL)

	type answer struct {
		key    string
		status int
		code   string
		retry  string
		ms     float64
		charge string
	}
	var mu sync.Mutex
	var answers []answer
	var errs []error
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Since(start) < duration {
				key := apitest.NewKey()
				body, _ := json.Marshal(map[string]any{"query": apitest.ChargeCardMutation, "variables": map[string]any{"key": key, "input": apitest.Visa(100)}})
				r, err := s.TrySend("POST", "/graphql", apitest.JSONHeaders("Authorization", "Bearer demo-key"), bytes.NewReader(body))
				g, gqlErr := r.TryGQL()
				if err := errors.Join(err, gqlErr); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				a := answer{key: key, status: r.Status, retry: r.Header.Get("Retry-After")}
				if len(g.Errors) > 0 {
					a.code, _ = g.Errors[0].Extensions["code"].(string)
					a.ms, _ = g.Errors[0].Extensions["retryAfterMs"].(float64)
				} else {
					a.charge = g.Data.ChargeCard.Status
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.Empty(t, errs, "every request got a GraphQL answer")

	var admitted, limited []answer
	for _, a := range answers {
		switch {
		case a.code == "RATE_LIMITED":
			require.Equal(t, http.StatusTooManyRequests, a.status)
			require.NotEmpty(t, a.retry, "Retry-After")
			require.Positive(t, a.ms, "retryAfterMs")
			limited = append(limited, a)
		case a.code == "" && a.charge == "SUCCEEDED":
			require.Equal(t, http.StatusOK, a.status)
			admitted = append(admitted, a)
		default:
			t.Fatalf("unexpected answer %+v", a)
		}
	}
	ceiling := burst + int(elapsed.Seconds()*perSecond) + 2
	t.Logf("%d requests in %s: %d admitted (ceiling %d), %d rate limited", len(answers), elapsed.Round(time.Millisecond), len(admitted), ceiling, len(limited))
	require.NotEmpty(t, limited, "the load went past the limit")
	require.LessOrEqual(t, len(admitted), ceiling, "the limit holds")
	require.GreaterOrEqual(t, len(admitted), burst, "the burst gets through")

	for _, a := range admitted {
		require.Len(t, s.ProviderCharges(t, "demo", a.key), 1, "admitted key %s: charged once", a.key)
	}
	var claimed int
	keys := make([]string, len(limited))
	for i, a := range limited {
		keys[i] = a.key
	}
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM charge_attempts WHERE idempotency_key = ANY($1)", keys).Scan(&claimed))
	require.Zero(t, claimed, "a limited request never claims its key")
	charges, err := s.API("").ListProviderCharges(context.Background(), apiclient.ProviderChargeFilter{})
	require.NoError(t, err)
	require.Len(t, charges, len(admitted), "no charge beyond the admitted keys")

	// A client that waits as told gets through, once.
	refused := limited[0]
	time.Sleep(time.Duration(refused.ms) * time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r := s.ChargeCard(c, "demo-key", refused.key, apitest.Visa(100))
		require.Empty(c, r.Errors)
		require.Equal(c, "SUCCEEDED", r.Data.ChargeCard.Status)
	}, 5*time.Second, 100*time.Millisecond)
	require.Len(t, s.ProviderCharges(t, "demo", refused.key), 1)
}

// TestRateLimit_UnauthenticatedTrafficPerAddress: requests without a valid
// API key (none, or a wrong one) are rationed per client address, and once
// an address has used up its allowance no key it sends is even looked up.
func TestRateLimit_UnauthenticatedTrafficPerAddress(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, map[string]string{"RATE_LIMIT_IP": "1", "RATE_LIMIT_IP_BURST": "5"})
	codes := map[string]int{}
	for i := range 12 {
		h := apitest.JSONHeaders("Authorization", "Bearer guess-"+strconv.Itoa(i))
		if i%3 == 0 {
			h = apitest.JSONHeaders() // no key at all
		}
		r := s.Send(t, "POST", "/graphql", h, apitest.JSONBody(t, map[string]any{"query": apitest.ChargeStatusQuery, "variables": map[string]any{"key": "k"}}))
		code := r.GQL(t).Code(t)
		codes[code]++
		if code == "RATE_LIMITED" {
			require.Equal(t, http.StatusTooManyRequests, r.Status)
			require.NotEmpty(t, r.Header.Get("Retry-After"))
		}
	}
	t.Logf("answers: %v", codes)
	require.Equal(t, 5, codes["UNAUTHENTICATED"], "the burst")
	require.Equal(t, 7, codes["RATE_LIMITED"], "then the address waits")
	require.Contains(t, s.LogText(), `msg="authentication failed"`)
}
