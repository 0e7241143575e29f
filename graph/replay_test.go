package graph_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/apitest"
	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/merchant"
	"chargeonce/metrics/metricstest"
)

// A replay of a settled charge is answered, from the second replay on,
// with the answer this instance gave the same request before, without
// running it: these tests send what a retry storm and what an attacker
// would, over real HTTP to a whole server on a real database.

const storedVisa = `{"amount":1250,"currency":"USD","paymentMethod":"pm_card_visa"}`

// send posts body as key's holder, with more headers as key/value pairs.
func send(t *testing.T, s *apitest.Server, apiKey, body string, kv ...string) apitest.RawResponse {
	t.Helper()
	h := apitest.JSONHeaders(append([]string{"Authorization", "Bearer " + apiKey}, kv...)...)
	return s.Send(t, http.MethodPost, "/graphql", h, strings.NewReader(body))
}

func TestStoredAnswers_ARetryStorm_GetsTheSameAnswer_EachReplayCounted(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, map[string]string{"HISTORY_FLUSH_INTERVAL": "100ms", "HISTORY_COUNT_INTERVAL": "100ms"})
	key := apitest.NewKey()
	body := apitest.ChargeBody(key, storedVisa)
	first := send(t, s, "demo-key", body).GQL(t)
	require.Empty(t, first.Errors)
	require.Equal(t, "SUCCEEDED", first.Data.ChargeCard.Status)
	require.False(t, first.Data.ChargeCard.Replayed)
	// The first replay runs the operation, and its answer is stored.
	replay := send(t, s, "demo-key", body)
	require.Equal(t, http.StatusOK, replay.Status)
	require.True(t, replay.GQL(t).Data.ChargeCard.Replayed)

	before := metricstest.Scrape(t, s.Client, s.URL+"/metrics")
	const storm = 60
	answers := make([]apitest.RawResponse, storm)
	var wg sync.WaitGroup
	for i := range storm {
		wg.Go(func() {
			r, err := s.TrySend(http.MethodPost, "/graphql",
				apitest.JSONHeaders("Authorization", "Bearer demo-key"), strings.NewReader(body))
			assert.NoError(t, err)
			answers[i] = r
		})
	}
	wg.Wait()
	for i, a := range answers {
		require.Equal(t, http.StatusOK, a.Status, "answer %d", i)
		require.Equal(t, "application/json", a.Header.Get("Content-Type"))
		require.Equal(t, string(replay.Body), string(a.Body), "answer %d is the replay's, byte for byte", i)
		require.NotEmpty(t, a.Header.Get("X-Request-Id"), "each answer is its own request's")
	}
	after := metricstest.Scrape(t, s.Client, s.URL+"/metrics")
	apitest.RequireDeltas(t, before, after, []apitest.MetricDelta{
		{Name: "chargeonce_stored_answers_total", Want: storm},
		{Name: "chargeonce_charge_replays_total", Want: storm},
		{Name: "chargeonce_result_cache_total", Labels: []string{"result", "hit"}, Want: storm},
		{Name: "chargeonce_charges_total", Labels: []string{"by", "request", "outcome", "succeeded"}, Want: 0},
	})
	require.Len(t, s.ProviderCharges(t, "demo", key), 1, "charged once")

	// The key's history counts every replay, the stored answers' too.
	requireReplaysCounted(t, s, key, 1+storm, "every replay")
}

// requireReplaysCounted waits until key's history, read through s, counts
// want replays.
func requireReplaysCounted(t *testing.T, s *apitest.Server, key string, want int, msg string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rows, err := s.API("demo-key").History(context.Background(), apiclient.AttemptKindCharge, key)
		if !assert.NoError(c, err) {
			return
		}
		replayed := 0
		for _, r := range rows {
			if r.Type == "request.replayed" {
				replayed += r.Count
			}
		}
		assert.Equal(c, want, replayed, msg)
	}, 10*time.Second, 50*time.Millisecond)
}

func TestStoredAnswers_AreGivenOnlyToTheSameRequestOfTheSameMerchant(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	merchants := merchant.New(dbtest.Open(t, s.DatabaseURL), false)
	_, acmeKey, err := merchants.CreateAPIKey(context.Background(), "acme", merchant.KeySecret)
	require.NoError(t, err)
	key := apitest.NewKey()
	body := apitest.ChargeBody(key, storedVisa)
	demo := send(t, s, "demo-key", body).GQL(t).Data.ChargeCard
	for range 2 {
		require.True(t, send(t, s, "demo-key", body).GQL(t).Data.ChargeCard.Replayed)
	}
	stored := func() float64 {
		return metricstest.Scrape(t, s.Client, s.URL+"/metrics").Value("chargeonce_stored_answers_total")
	}
	require.Equal(t, 1.0, stored(), "the second replay was the stored answer")

	// Another merchant sending the very same body charges its own key.
	acme := send(t, s, acmeKey, body).GQL(t)
	require.Empty(t, acme.Errors)
	require.False(t, acme.Data.ChargeCard.Replayed, "acme's key of the same name is acme's own attempt")
	require.NotEqual(t, demo.Charge.Id, acme.Data.ChargeCard.Charge.Id)
	require.Len(t, s.ProviderCharges(t, "acme", key), 1)

	// The same key with another amount is refused as ever.
	reused := send(t, s, "demo-key", apitest.ChargeBody(key, `{"amount":1251,"currency":"USD","paymentMethod":"pm_card_visa"}`)).GQL(t)
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", reused.Code(t))

	// An Idempotency-Key header that differs from the argument is refused,
	// one that agrees gets the replay.
	differs := send(t, s, "demo-key", body, "Idempotency-Key", "another-key").GQL(t)
	require.Equal(t, "BAD_USER_INPUT", differs.Code(t))
	require.Nil(t, differs.Data.ChargeCard)
	for range 2 {
		agrees := send(t, s, "demo-key", body, "Idempotency-Key", key).GQL(t)
		require.Empty(t, agrees.Errors)
		require.True(t, agrees.Data.ChargeCard.Replayed)
	}
	require.Equal(t, 2.0, stored(), "the header's requests have their own stored answer")

	// Without credentials, or with a revoked key, the stored answer is not
	// given: the door is the same for every request.
	anonymous := s.Send(t, http.MethodPost, "/graphql", apitest.JSONHeaders(), strings.NewReader(body)).GQL(t)
	require.Equal(t, "UNAUTHENTICATED", anonymous.Code(t))
	_, demo2, err := merchants.CreateAPIKey(context.Background(), "demo", merchant.KeySecret)
	require.NoError(t, err)
	for range 2 {
		require.True(t, send(t, s, demo2, body).GQL(t).Data.ChargeCard.Replayed, "the merchant's other key replays too")
	}
	_, err = merchants.RevokeAPIKey(context.Background(), demo2[:10])
	require.NoError(t, err)
	// The revocation reaches the key cache by a notification: until then
	// the key still works, the stored answer with it.
	deadline := time.Now().Add(10 * time.Second)
	r := send(t, s, demo2, body).GQL(t)
	for len(r.Errors) == 0 && time.Now().Before(deadline) {
		require.True(t, r.Data.ChargeCard.Replayed)
		time.Sleep(50 * time.Millisecond)
		r = send(t, s, demo2, body).GQL(t)
	}
	require.Equal(t, "UNAUTHENTICATED", r.Code(t))
	require.Nil(t, r.Data.ChargeCard)
}

// A charge's refunds change its answer: a document that asks for them is
// run every time, and shows the refund at once.
func TestStoredAnswers_AnAnswerThatCanChange_IsNeverStored(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	key := apitest.NewKey()
	query := `mutation($key: String!, $input: ChargeCardInput!) { chargeCard(idempotencyKey: $key, input: $input) {
		status replayed charge { id ... on Charge { amountRefunded } } } }`
	vars := map[string]any{"key": key, "input": map[string]any{"amount": 1250, "currency": "USD", "paymentMethod": "pm_card_visa"}}
	var got struct {
		Data struct {
			ChargeCard struct {
				Replayed bool
				Charge   struct {
					ID             string
					AmountRefunded int
				}
			}
		}
		Errors []any
	}
	s.Post(t, "demo-key", nil, query, vars, &got)
	for range 2 {
		s.Post(t, "demo-key", nil, query, vars, &got)
		require.True(t, got.Data.ChargeCard.Replayed)
		require.Zero(t, got.Data.ChargeCard.Charge.AmountRefunded)
	}
	amount := 500
	_, err := s.API("demo-key").RefundCharge(context.Background(), apitest.NewKey(),
		apiclient.RefundInput{ChargeId: got.Data.ChargeCard.Charge.ID, Amount: &amount})
	require.NoError(t, err)
	s.Post(t, "demo-key", nil, query, vars, &got)
	require.Equal(t, 500, got.Data.ChargeCard.Charge.AmountRefunded, "the replay after the refund shows it")
	require.Zero(t, metricstest.Scrape(t, s.Client, s.URL+"/metrics").Value("chargeonce_stored_answers_total"))
}

// The client library asks for a charge's capture state with its outcome:
// fixed for good for a charge that took the money at once, so its replays
// get the stored answer; an authorization's changes with each capture, so
// its replays run, and show a capture at once.
func TestStoredAnswers_TheClientsDocument_StoredForAnAutomaticCharge_NotForAnAuthorization(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, nil)
	ctx := context.Background()
	api := s.API(apiclient.DemoAPIKey)
	stored := func() float64 {
		return metricstest.Scrape(t, s.Client, s.URL+"/metrics").Value("chargeonce_stored_answers_total")
	}
	key := apitest.NewKey()
	first, err := api.ChargeCard(ctx, key, apitest.Visa(900))
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusCaptured, first.Charge.CaptureStatus)
	for range 3 {
		r, err := api.ChargeCard(ctx, key, apitest.Visa(900))
		require.NoError(t, err)
		require.True(t, r.Replayed)
		require.Equal(t, first.Charge, r.Charge)
	}
	require.Equal(t, 2.0, stored(), "the second and third replays were the stored answer")

	charge, authorized := s.Authorize(t, apitest.Visa(700))
	for range 3 {
		r, err := api.ChargeCard(ctx, authorized, apitest.Manual(700))
		require.NoError(t, err)
		require.True(t, r.Replayed)
		require.Equal(t, apiclient.CaptureStatusUncaptured, r.Charge.CaptureStatus)
		require.Equal(t, 700, r.Charge.AmountCapturable)
	}
	require.Equal(t, 2.0, stored(), "an authorization's replays ran")
	amount := 300
	s.Capture(t, apitest.NewKey(), apiclient.CaptureInput{ChargeId: charge, Amount: &amount})
	r, err := api.ChargeCard(ctx, authorized, apitest.Manual(700))
	require.NoError(t, err)
	require.Equal(t, apiclient.CaptureStatusCaptured, r.Charge.CaptureStatus, "a final capture of part of it, at once")
	require.Equal(t, 300, r.Charge.AmountCaptured)
	require.Zero(t, r.Charge.AmountCapturable)
}

// After a restart or a failover, a storm of replays meets instances whose
// memory never held the keys. Such an instance, once most of its requests
// are replays, reads the answer another instance gave the same request
// from the database, in one statement, and gives it byte for byte; its
// first requests, and any while most are fresh charges, run.
func TestStoredAnswers_AStormOnAnInstanceThatNeverSawTheKeys_GetsTheAnswersFromTheDatabase(t *testing.T) {
	t.Parallel()
	a := apitest.Start(t, map[string]string{"HISTORY_FLUSH_INTERVAL": "100ms", "HISTORY_COUNT_INTERVAL": "100ms"})
	const n, spare = 40, 1
	bodies, keys := make([]string, n+spare), make([]string, n+spare)
	given := make([]string, n+spare) // a's answer to each key's first replay
	for i := range bodies {
		keys[i] = apitest.NewKey()
		bodies[i] = apitest.ChargeBody(keys[i], storedVisa)
		require.False(t, send(t, a, "demo-key", bodies[i]).GQL(t).Data.ChargeCard.Replayed)
		replay := send(t, a, "demo-key", bodies[i])
		require.True(t, replay.GQL(t).Data.ChargeCard.Replayed)
		given[i] = string(replay.Body)
	}
	pool := dbtest.Open(t, a.DatabaseURL)
	require.Eventually(t, func() bool {
		var kept int
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM stored_answers").Scan(&kept))
		return kept == n+spare
	}, 10*time.Second, 20*time.Millisecond, "a kept every replay's answer in the database")

	// b keeps nothing in memory: every answer it gives is rendered or read.
	b := apitest.StartOn(t, a.DatabaseURL, map[string]string{
		"RESULT_CACHE_SIZE": "0", "HISTORY_FLUSH_INTERVAL": "100ms", "HISTORY_COUNT_INTERVAL": "100ms"})
	fromDatabase := func() float64 {
		return metricstest.Scrape(t, b.Client, b.URL+"/metrics").Value("chargeonce_stored_answers_total", "from", "database")
	}
	storm := func() {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range next {
					r, err := b.TrySend(http.MethodPost, "/graphql",
						apitest.JSONHeaders("Authorization", "Bearer demo-key"), strings.NewReader(bodies[i]))
					if assert.NoError(t, err) {
						assert.Equal(t, given[i], string(r.Body), "key %d's answer, byte for byte", i)
					}
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	storm()
	read := fromDatabase()
	require.GreaterOrEqual(t, read, float64(n-16-8), "once half its window were replays, b read the answers")
	require.LessOrEqual(t, read, float64(n-16), "b's first 16 replays ran")
	storm()
	require.Equal(t, read+n, fromDatabase(), "in the storm, every replay read its answer")
	for _, key := range keys[:n] {
		requireReplaysCounted(t, b, key, 3, "a's replay and b's two, each counted once")
	}

	// No other request reads the database for an answer.
	misses := func() float64 {
		return metricstest.Scrape(t, b.Client, b.URL+"/metrics").Value("chargeonce_stored_answer_misses_total")
	}
	missed := misses()
	for range 20 {
		require.Equal(t, http.StatusOK, send(t, b, "demo-key", `{"query":"{ __typename }"}`).Status)
	}
	require.Equal(t, missed, misses())

	// Fresh charges end the storm: each read for nothing until then, and
	// then b stops reading, and a replay runs.
	for range 32 {
		require.False(t, send(t, b, "demo-key", apitest.ChargeBody(apitest.NewKey(), storedVisa)).GQL(t).Data.ChargeCard.Replayed)
	}
	require.Equal(t, missed+17, misses(), "from a full window to half of it, and the one at half")
	before := fromDatabase()
	r := send(t, b, "demo-key", bodies[n])
	require.Equal(t, given[n], string(r.Body))
	require.Equal(t, before, fromDatabase(), "the replay ran")
}
