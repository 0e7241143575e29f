package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/metrics/metricstest"
)

// Metrics that move as charges happen: exact deltas of what the hardening
// issue asks chargeonce to count, scraped from a real server.

func TestMetrics_MoveAsChargesHappen(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// No reconciler pass: every count here is the requests' own. A slow card
	// takes two seconds, time enough to send a second request while it works.
	s := StartOn(t, dbURL, map[string]string{"RECONCILE_INTERVAL": "1h", "SIM_SLOW_DELAY": "2s"})
	before := metricstest.Scrape(t, s.Client, s.URL+"/metrics")
	require.Contains(t, before, "chargeonce_stuck_processing_attempts")
	require.Zero(t, before.Value("chargeonce_stuck_processing_attempts"))
	chargeCards := 0
	charge := func(apiKey, key string, input apiclient.ChargeCardInput) Response {
		chargeCards++
		return s.ChargeCard(t, apiKey, key, input)
	}

	// A charge, its replay, a decline, the key reused, the order paid again.
	paid := Visa(1999)
	paid.OrderId = new("order-paid")
	keyA := NewKey()
	require.Equal(t, "SUCCEEDED", charge("demo-key", keyA, paid).Data.ChargeCard.Status)
	require.True(t, charge("demo-key", keyA, paid).Data.ChargeCard.Replayed)
	require.Equal(t, "FAILED", charge("demo-key", NewKey(), WithPaymentMethod("pm_card_chargeDeclined")).Data.ChargeCard.Status)
	otherAmount := paid
	otherAmount.Amount = new(2000)
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", charge("demo-key", keyA, otherAmount).Code(t))
	require.Equal(t, "ORDER_ALREADY_PAID", charge("demo-key", NewKey(), paid).Code(t))

	// An outcome nobody knows: the provider fails every call, the inline
	// retries included. Its order is being paid, so another key is refused;
	// a retry takes the released attempt over and asks the provider again.
	unknown := WithPaymentMethod("pm_card_providerError")
	unknown.OrderId = new("order-pending")
	keyD := NewKey()
	require.Equal(t, "PROCESSING", charge("demo-key", keyD, unknown).Data.ChargeCard.Status)
	pending := Visa(500)
	pending.OrderId = new("order-pending")
	require.Equal(t, "ORDER_ALREADY_PAID", charge("demo-key", NewKey(), pending).Code(t))
	require.Equal(t, "PROCESSING", charge("demo-key", keyD, unknown).Data.ChargeCard.Status)

	// A second request while the first still works on the key.
	keyE, slow := NewKey(), WithPaymentMethod("pm_card_slow")
	type answer struct {
		r   *apiclient.ChargeResult
		err error
	}
	first := make(chan answer, 1)
	chargeCards++
	go func() {
		r, err := s.API("demo-key").ChargeCard(context.Background(), keyE, slow)
		first <- answer{r, err}
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := s.ChargeStatus(c, "demo-key", keyE).Data.ChargeStatus
		require.NotNil(c, st)
		require.Equal(c, "PROCESSING", st.Status)
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, "PROCESSING", charge("demo-key", keyE, slow).Data.ChargeCard.Status)
	got := <-first
	require.NoError(t, got.err)
	require.Equal(t, "SUCCEEDED", got.r.Status)

	// Callers without a valid API key.
	require.Equal(t, "UNAUTHENTICATED", charge("co_sk_NotAKeyAnyoneHas", NewKey(), Visa(100)).Code(t))
	chargeCards++
	require.Equal(t, "UNAUTHENTICATED", s.Do(t, nil, ChargeCardMutation, map[string]any{"key": NewKey(), "input": Visa(100)}).Code(t))

	after := metricstest.Scrape(t, s.Client, s.URL+"/metrics")
	RequireDeltas(t, before, after, []MetricDelta{
		{"chargeonce_charges_total", []string{"outcome", "succeeded", "by", "request"}, 2},
		{"chargeonce_charges_total", []string{"outcome", "failed", "by", "request"}, 1},
		{"chargeonce_charges_total", []string{"by", "reconciler"}, 0},
		{"chargeonce_charge_replays_total", nil, 1},
		{"chargeonce_charge_in_flight_total", nil, 1},
		{"chargeonce_charge_idempotency_key_reused_total", nil, 1},
		// One order paid, one being paid under another key.
		{"chargeonce_charge_order_already_paid_total", nil, 2},
		// The first request for keyD, and its retry, which took the attempt
		// over and still could not learn the outcome.
		{"chargeonce_charge_outcome_unknown_total", nil, 2},
		{"chargeonce_charge_retry_takeovers_total", nil, 1},
		{"chargeonce_unauthenticated_requests_total", nil, 2},
		{"chargeonce_rate_limited_total", nil, 0},
		// Two charges went through, one was declined; the unknown outcome
		// was sent three times inline (the first call and two retries) and
		// once more by the retry that took it over, after looking it up.
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "create_charge", "result", "ok"}, 2},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "create_charge", "result", "declined"}, 1},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "create_charge", "result", "unknown"}, 4},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "find_charge", "result", "not_found"}, 1},
		{"chargeonce_provider_errors_total", []string{"operation", "create_charge"}, 4},
		{"chargeonce_provider_errors_total", []string{"operation", "find_charge"}, 0},
		// GraphQL errors are answers, not HTTP failures.
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "chargeCard"}, float64(chargeCards)},
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "chargeCard", "code", "200"}, float64(chargeCards)},
		{"chargeonce_reconciler_takeovers_total", nil, 0},
		{"chargeonce_retention_deleted_total", nil, 0},
	})
	require.Equal(t, 1.0, after.Value("chargeonce_stuck_processing_attempts"), "keyD waits for the reconciler")
	require.Positive(t, after.Value("chargeonce_provider_request_duration_seconds_sum", "operation", "create_charge", "result", "ok"))
	for _, name := range []string{"pgxpool_acquired_conns", "pgxpool_total_conns", "pgxpool_max_conns", "pgxpool_acquire_count"} {
		require.Contains(t, after, name)
		require.Equal(t, "chargeonce", after[name][0].Labels["db"], name)
	}
	require.Positive(t, after.Value("pgxpool_acquire_count"))
	require.Contains(t, after, "go_goroutines")
}

func TestMetrics_ReconcilerTakesOverRedrivesAndGivesUp(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// The request gives the attempt up after half the lease; the window
	// leaves the reconciler seconds of passes to send it again, even on a
	// busy machine.
	s := StartOn(t, dbURL, map[string]string{
		"PROCESSING_LEASE":   "1s",
		"RECONCILE_INTERVAL": "100ms",
		"REDRIVE_WINDOW":     "3s",
	})
	before := metricstest.Scrape(t, s.Client, s.URL+"/metrics")

	// The provider never answers keyP: sent again on every pass within the
	// redrive window, then given up. keyL was charged but its answer lost:
	// the reconciler finds the charge by our key.
	keyP, keyL := NewKey(), NewKey()
	require.Equal(t, "PROCESSING", s.ChargeCard(t, "demo-key", keyP, WithPaymentMethod("pm_card_providerError")).Data.ChargeCard.Status)
	require.Equal(t, "PROCESSING", s.ChargeCard(t, "demo-key", keyL, WithPaymentMethod("pm_card_lostResponse")).Data.ChargeCard.Status)

	var after metricstest.Samples
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		after = metricstest.Scrape(c, s.Client, s.URL+"/metrics")
		require.Equal(c, 2.0, after.Value("chargeonce_charges_total", "by", "reconciler"))
	}, 20*time.Second, 50*time.Millisecond, "the reconciler settles both attempts")
	require.Equal(t, "FAILED", s.ChargeStatus(t, "demo-key", keyP).Data.ChargeStatus.Status)
	require.Equal(t, "provider_unavailable", s.ChargeStatus(t, "demo-key", keyP).Data.ChargeStatus.Failure.Code)
	require.Equal(t, "SUCCEEDED", s.ChargeStatus(t, "demo-key", keyL).Data.ChargeStatus.Status)
	require.Len(t, s.ProviderCharges(t, "demo", keyL), 1)

	delta := func(name string, labels ...string) float64 {
		return after.Value(name, labels...) - before.Value(name, labels...)
	}
	redrives := delta("chargeonce_reconciler_redrives_total")
	require.GreaterOrEqual(t, redrives, 1.0, "keyP was sent again within the window")
	RequireDeltas(t, before, after, []MetricDelta{
		{"chargeonce_charges_total", []string{"outcome", "failed", "by", "reconciler"}, 1},
		{"chargeonce_charges_total", []string{"outcome", "succeeded", "by", "reconciler"}, 1},
		{"chargeonce_charges_total", []string{"by", "request"}, 0},
		{"chargeonce_charge_outcome_unknown_total", nil, 2},
		{"chargeonce_reconciler_give_ups_total", nil, 1},
		// Every pass that took keyP over sent it again or gave it up; keyL
		// was taken over once.
		{"chargeonce_reconciler_takeovers_total", nil, redrives + 2},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "find_charge", "result", "not_found"}, redrives + 1},
		{"chargeonce_provider_request_duration_seconds_count", []string{"operation", "find_charge", "result", "ok"}, 1},
		{"chargeonce_charge_retry_takeovers_total", nil, 0},
	})
	require.Equal(t,
		delta("chargeonce_provider_request_duration_seconds_count", "operation", "create_charge", "result", "unknown"),
		delta("chargeonce_provider_errors_total", "operation", "create_charge"),
		"every unknown outcome is a provider error")
	require.Zero(t, after.Value("chargeonce_stuck_processing_attempts"))
}

func TestMetrics_RetentionCountsForgottenKeys(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := StartOn(t, dbURL, map[string]string{
		"KEY_RETENTION":      "1ms",
		"CLEANUP_INTERVAL":   "100ms",
		"RECONCILE_INTERVAL": "1h",
	})
	pool := dbtest.Open(t, dbURL)
	before := metricstest.Scrape(t, s.Client, s.URL+"/metrics")

	// The PROCESSING attempt expires first, yet is never forgotten; the
	// succeeded and the failed one are.
	keyP, keyS, keyF := NewKey(), NewKey(), NewKey()
	require.Equal(t, "PROCESSING", s.ChargeCard(t, "demo-key", keyP, WithPaymentMethod("pm_card_providerError")).Data.ChargeCard.Status)
	require.Equal(t, "SUCCEEDED", s.ChargeCard(t, "demo-key", keyS, Visa(100)).Data.ChargeCard.Status)
	require.Equal(t, "FAILED", s.ChargeCard(t, "demo-key", keyF, WithPaymentMethod("pm_card_chargeDeclined")).Data.ChargeCard.Status)

	var after metricstest.Samples
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		after = metricstest.Scrape(c, s.Client, s.URL+"/metrics")
		require.GreaterOrEqual(c, after.Value("chargeonce_retention_deleted_total")-before.Value("chargeonce_retention_deleted_total"), 2.0)
	}, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, 2.0, after.Value("chargeonce_retention_deleted_total")-before.Value("chargeonce_retention_deleted_total"))
	require.Nil(t, s.ChargeStatus(t, "demo-key", keyS).Data.ChargeStatus, "keyS is forgotten")
	require.Nil(t, s.ChargeStatus(t, "demo-key", keyF).Data.ChargeStatus, "keyF is forgotten")
	require.Equal(t, "PROCESSING", AttemptStatus(t, pool, keyP))
	var charges int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM charges").Scan(&charges))
	require.Equal(t, 1, charges, "the charge itself is kept")
}

func TestMetrics_CountRateLimitedAndUnauthenticatedRequests(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	// Bursts of one, refilled once in 100 s: the second request is refused
	// however slowly the first one runs.
	s := StartOn(t, dbURL, map[string]string{
		"RATE_LIMIT_MERCHANT": "0.01", "RATE_LIMIT_MERCHANT_BURST": "1",
		"RATE_LIMIT_IP": "0.01", "RATE_LIMIT_IP_BURST": "1",
	})
	before := metricstest.Scrape(t, s.Client, s.URL+"/metrics")
	post := func(headers http.Header, query string, vars map[string]any) RawResponse {
		body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
		require.NoError(t, err)
		return s.Send(t, http.MethodPost, "/graphql", headers, bytes.NewReader(body))
	}

	// The merchant's burst is one request; the next is refused.
	withKey := JSONHeaders("Authorization", "Bearer demo-key")
	vars := map[string]any{"key": NewKey(), "input": Visa(100)}
	require.Equal(t, "SUCCEEDED", post(withKey, ChargeCardMutation, vars).GQL(t).Data.ChargeCard.Status)
	limited := post(withKey, ChargeCardMutation, map[string]any{"key": NewKey(), "input": Visa(100)})
	require.Equal(t, http.StatusTooManyRequests, limited.Status)
	require.Equal(t, "RATE_LIMITED", limited.GQL(t).Code(t))

	// So is an address's unauthenticated traffic.
	require.Equal(t, "UNAUTHENTICATED", post(JSONHeaders(), ChargeStatusQuery, map[string]any{"key": NewKey()}).GQL(t).Code(t))
	limited = post(JSONHeaders(), ChargeStatusQuery, map[string]any{"key": NewKey()})
	require.Equal(t, http.StatusTooManyRequests, limited.Status)
	require.Equal(t, "RATE_LIMITED", limited.GQL(t).Code(t))

	after := metricstest.Scrape(t, s.Client, s.URL+"/metrics")
	RequireDeltas(t, before, after, []MetricDelta{
		{"chargeonce_rate_limited_total", []string{"scope", "merchant"}, 1},
		{"chargeonce_rate_limited_total", []string{"scope", "ip"}, 1},
		{"chargeonce_unauthenticated_requests_total", nil, 2},
		{"chargeonce_charges_total", nil, 1},
		// Refused before GraphQL: no operation is known.
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "none", "code", "429"}, 2},
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "chargeCard", "code", "200"}, 1},
		{"chargeonce_http_request_duration_seconds_count", []string{"operation", "chargeStatus", "code", "200"}, 1},
	})
}
