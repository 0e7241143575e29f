package systest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/graph/graphtest"
	"chargeonce/internal/apiclient"
	"chargeonce/metrics/metricstest"
)

// The public door: what strangers can make a real server do through the
// API a checkout page reaches (a publishable key, sessions' client
// secrets), each attack made as an attacker makes it, from client
// addresses of their own. Loopback is all of 127.0.0.0/8: a client bound to
// 127.0.0.N is, to the server, another address.

// demoPublishableKey is the demo merchant's publishable key on a
// development server (DEMO_PUBLISHABLE_KEY's default).
const demoPublishableKey = "co_pk_demo"

// clientFrom is an API client of s with apiKey whose requests come from ip.
func (s *server) clientFrom(ip, apiKey string) *apiclient.Client {
	return apiclient.New(s.URL, apiKey, graphtest.ClientFrom(ip))
}

// openSession creates a checkout session of the demo merchant for amount
// with its secret key, as the merchant's server does, and returns its
// client secret.
func (s *server) openSession(t *testing.T, amount int) string {
	t.Helper()
	sess, err := s.demo().CreateCheckoutSession(t.Context(), newKey(), apiclient.CheckoutSessionInput{Amount: amount, Currency: "USD"})
	require.NoError(t, err)
	require.NotNil(t, sess.ClientSecret)
	return *sess.ClientSecret
}

// scrape reads s's metrics (served on its own port in development).
func (s *server) scrape(t *testing.T) metricstest.Samples {
	t.Helper()
	return metricstest.Scrape(t, s.HTTP, s.URL+"/metrics")
}

// TestBudgets_PublishableTrafficNeverSpendsTheSecretKeys: a flood with the
// merchant's public key, from several addresses, runs into budgets of its
// own, per address and per merchant, while the merchant's server, with its
// secret key, is served as if nothing happened.
func TestBudgets_PublishableTrafficNeverSpendsTheSecretKeys(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	s := startServer(t, map[string]string{
		"DATABASE_URL":        dbtest.NewDatabase(t),
		"RATE_LIMIT_MERCHANT": "0.01", "RATE_LIMIT_MERCHANT_BURST": "6",
		"RATE_LIMIT_PUBLISHABLE": "0.01", "RATE_LIMIT_PUBLISHABLE_BURST": "8",
		"RATE_LIMIT_PUBLISHABLE_IP": "0.01", "RATE_LIMIT_PUBLISHABLE_IP_BURST": "3",
	})
	secret := s.openSession(t, 500) // the merchant's first request
	status := func(page *apiclient.Client) string {
		_, err := page.SessionChargeStatus(context.Background(), newKey(), secret)
		return apiclient.Code(err)
	}

	// One address: its burst, then refused.
	page := s.clientFrom("127.0.0.2", demoPublishableKey)
	for i := range 3 {
		require.Empty(t, status(page), "request %d", i)
	}
	require.Equal(t, "RATE_LIMITED", status(page), "past the address's burst")

	// Five more addresses, two requests each, all at once: what is left of
	// the merchant's publishable burst (five) is served, and no more.
	var served, limited atomic.Int32
	var wg sync.WaitGroup
	for _, ip := range []string{"127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"} {
		page := s.clientFrom(ip, demoPublishableKey)
		for range 2 {
			wg.Go(func() {
				switch code := status(page); code {
				case "":
					served.Add(1)
				case "RATE_LIMITED":
					limited.Add(1)
				default:
					t.Errorf("%s was answered %s", ip, code)
				}
			})
		}
	}
	wg.Wait()
	require.Equal(t, int32(5), served.Load())
	require.Equal(t, int32(5), limited.Load())
	m := s.scrape(t)
	require.Equal(t, 1.0, m.Value("chargeonce_rate_limited_total", "scope", "publishable_ip"))
	require.Equal(t, 5.0, m.Value("chargeonce_rate_limited_total", "scope", "publishable"))

	// The merchant's server has spent one of its six; the other five are
	// all there.
	for i := range 5 {
		_, err := s.demo().CreateCheckoutSession(t.Context(), newKey(), apiclient.CheckoutSessionInput{Amount: 600 + i, Currency: "USD"})
		require.NoError(t, err, "the secret key's request %d", i)
	}
	_, err := s.demo().CreateCheckoutSession(t.Context(), newKey(), apiclient.CheckoutSessionInput{Amount: 700, Currency: "USD"})
	require.Equal(t, "RATE_LIMITED", apiclient.Code(err), "and the secret key has a budget of its own")
	require.Equal(t, 1.0, s.scrape(t).Value("chargeonce_rate_limited_total", "scope", "merchant"), "one refusal of the secret key: its own seventh")
}

// guessedSecret is a client secret of the right form that names no session.
func guessedSecret() string {
	id := uuid.New()
	return "cs_" + hex.EncodeToString(id[:]) + "_secret_" + strings.Repeat("A", 43)
}

// payFrom pays the session of secret with card under a new key, from ip
// with the publishable key; it returns the status, or the error's code.
func (s *server) payFrom(ctx context.Context, page *apiclient.Client, secret, card string) (key, outcome string) {
	key = newKey()
	res, err := page.ChargeCard(ctx, key, apiclient.ChargeCardInput{PaymentMethod: card, CheckoutSession: &secret})
	if err != nil {
		return key, cmp.Or(apiclient.Code(err), err.Error())
	}
	return key, res.Status
}

// TestCardTesting_ConcurrentDeclinesFromOneAddress_ReachTheProviderAtMostTheBurst:
// 30 declined cards at once, from one address, each on a session of its
// own: the address's allowance is taken before the provider is called, so
// the provider sees RATE_LIMIT_DECLINES_IP_BURST of them (10), not 30.
func TestCardTesting_ConcurrentDeclinesFromOneAddress_ReachTheProviderAtMostTheBurst(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t)})
	secrets := make([]string, 30)
	for i := range secrets {
		secrets[i] = s.openSession(t, 100+i)
	}
	attacker := s.clientFrom("127.0.0.2", demoPublishableKey)
	keys, outcomes := make([]string, 30), make([]string, 30)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range secrets {
		wg.Go(func() {
			<-start
			keys[i], outcomes[i] = s.payFrom(context.Background(), attacker, secrets[i], "pm_card_chargeDeclined")
		})
	}
	close(start)
	wg.Wait()
	counts := map[string]int{}
	reached := 0
	for i, key := range keys {
		counts[outcomes[i]]++
		charges, err := s.demo().ProviderCharges(t.Context(), "", key)
		require.NoError(t, err)
		reached += len(charges)
	}
	require.Equal(t, map[string]int{"FAILED": 10, "RATE_LIMITED": 20}, counts)
	require.Equal(t, 10, reached, "the provider saw the burst, and no more")

	// A shopper elsewhere is not touched by it.
	_, outcome := s.payFrom(t.Context(), s.clientFrom("127.0.0.3", demoPublishableKey), s.openSession(t, 999), "pm_card_visa")
	require.Equal(t, "SUCCEEDED", outcome)
}

// TestCardTesting_RotatingAttacker_NeverRefusesAGoodShopper: declines
// rotated over 20 addresses, each inside its own allowance, run the
// publishable key's shared count dry. That raises a suspicion (a metric,
// the merchant's event), and refuses no shopper whose address has declined
// nothing: every good card pays.
func TestCardTesting_RotatingAttacker_NeverRefusesAGoodShopper(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL, "SESSION_MAX_ATTEMPTS": "50",
		// The key's allowance is small, so that the test runs it dry at once.
		"RATE_LIMIT_DECLINES_KEY": "0.01", "RATE_LIMIT_DECLINES_KEY_BURST": "5"})
	attackers := make([]*apiclient.Client, 20)
	for i := range attackers {
		attackers[i] = s.clientFrom(fmt.Sprintf("127.0.1.%d", i+1), demoPublishableKey)
	}
	shoppers := make([]*apiclient.Client, 5)
	for i := range shoppers {
		shoppers[i] = s.clientFrom(fmt.Sprintf("127.0.2.%d", i+1), demoPublishableKey)
	}
	// Each attacker pays a session of its own: stolen, or opened at the
	// merchant's checkout.
	stolen := make([]string, len(attackers))
	for i := range stolen {
		stolen[i] = s.openSession(t, 4200+i)
	}
	carts := make([][]string, 4) // each shopper's session of each round
	for round := range carts {
		for i := range shoppers {
			carts[round] = append(carts[round], s.openSession(t, 1000+10*round+i))
		}
	}
	ctx, stop := context.WithCancel(t.Context())
	var attacks sync.WaitGroup
	var declined atomic.Int32
	for i, a := range attackers {
		attacks.Go(func() {
			// Two declines each: well inside an address's ten.
			for range 2 {
				if _, outcome := s.payFrom(ctx, a, stolen[i], "pm_card_chargeDeclined"); outcome == "FAILED" {
					declined.Add(1)
				}
			}
		})
	}
	// Meanwhile, and after, the shoppers pay good cards: all of them.
	var paid sync.WaitGroup
	outcomes := make(chan string, 40)
	for round := range carts {
		for i, shopper := range shoppers {
			paid.Go(func() {
				_, outcome := s.payFrom(ctx, shopper, carts[round][i], "pm_card_visa")
				outcomes <- outcome
			})
		}
		if round == 1 {
			attacks.Wait() // the second half runs once every decline is in
		}
	}
	paid.Wait()
	stop()
	close(outcomes)
	for outcome := range outcomes {
		require.Equal(t, "SUCCEEDED", outcome, "a good card from a clean address pays")
	}
	require.Equal(t, int32(40), declined.Load(), "every decline of the attack reached the provider: each address stayed inside its allowance")
	m := s.scrape(t)
	require.Equal(t, 1.0, m.Value("chargeonce_card_testing_suspected_total"), "one suspicion for the window")
	require.Zero(t, m.Value("chargeonce_rate_limited_total", "scope", "declines_key"), "the key's count refuses nobody")
	pool := dbtest.Open(t, dbURL)
	// The merchant's event went through the outbox to the stream.
	waitRows(t, pool, 1, 30*time.Second, "SELECT count(*) FROM charge_events WHERE type = 'merchant.card_testing_suspected' AND sent_at IS NOT NULL")
}

// TestCardTesting_GuessedSecrets_SpendTheAddressAllowance_AliasesAreRefused:
// client secrets that name no session, guessed on chargeStatus and on
// chargeUpdated, spend the address's allowance like declines; and a
// publishable key may run one operation per request, so 100 aliased guesses
// in one document are refused before any is looked up.
func TestCardTesting_GuessedSecrets_SpendTheAddressAllowance_AliasesAreRefused(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t)})

	var doc strings.Builder
	doc.WriteString("query {")
	for i := range 100 {
		fmt.Fprintf(&doc, ` g%d: chargeStatus(idempotencyKey: "k%d", checkoutSession: %q) { status }`, i, i, guessedSecret())
	}
	doc.WriteString(" }")
	body, err := json.Marshal(map[string]any{"query": doc.String()})
	require.NoError(t, err)
	r := s.send(t, http.MethodPost, "/graphql", http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + demoPublishableKey}}, bytes.NewReader(body))
	answer := r.gql(t)
	require.Len(t, answer.Errors, 1, "%s", r.body)
	require.Equal(t, "BAD_REQUEST", answer.Errors[0].Extensions["code"])
	require.Contains(t, answer.Errors[0].Message, "runs 100")
	require.Zero(t, s.scrape(t).Value("chargeonce_publishable_declines_total", "scope", "ip"), "nothing was looked up")

	guesser := s.clientFrom("127.0.0.2", demoPublishableKey)
	for i := range 10 {
		_, err := guesser.SessionChargeStatus(t.Context(), newKey(), guessedSecret())
		require.Equal(t, "NOT_FOUND", apiclient.Code(err), "guess %d", i)
	}
	_, err = guesser.SessionChargeStatus(t.Context(), newKey(), guessedSecret())
	require.Equal(t, "RATE_LIMITED", apiclient.Code(err), "the eleventh guess is refused before it is looked up")
	// The subscription takes from the same allowance.
	resp, _ := graphtest.PostSSE(t, graphtest.ClientFrom("127.0.0.2"), s.URL, map[string]string{"Authorization": "Bearer " + demoPublishableKey},
		sessionChargeUpdated, map[string]any{"key": newKey(), "session": guessedSecret()})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "RATE_LIMITED", graphtest.NewSSE(resp).MustNext(t).Code(t))
	// A shopper elsewhere reads their own session's attempt.
	shopper := s.clientFrom("127.0.0.3", demoPublishableKey)
	secret := s.openSession(t, 700)
	key, outcome := s.payFrom(t.Context(), shopper, secret, "pm_card_visa")
	require.Equal(t, "SUCCEEDED", outcome)
	res, err := shopper.SessionChargeStatus(t.Context(), key, secret)
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", res.Status)
}

// sessionChargeUpdated is chargeUpdated as a checkout page subscribes to it.
const sessionChargeUpdated = `subscription($key: String!, $session: String) { chargeUpdated(idempotencyKey: $key, checkoutSession: $session) { status } }`

// TestBrowserReads_TheMerchantsRecordsStayTheMerchants: a page reads its
// charge and the refunds of it with the publishable key, amounts and
// statuses, but not the reason the merchant gave for a refund, which only
// the secret key reads (SECURITY.md lists every field's audience).
func TestBrowserReads_TheMerchantsRecordsStayTheMerchants(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t)})
	secret := s.openSession(t, 2500)
	page := s.clientFrom("127.0.0.2", demoPublishableKey)
	key, outcome := s.payFrom(t.Context(), page, secret, "pm_card_visa")
	require.Equal(t, "SUCCEEDED", outcome)
	paid, err := page.SessionChargeStatus(t.Context(), key, secret)
	require.NoError(t, err)
	const reason = "INTERNAL: customer flagged as chargeback risk"
	refund, err := s.demo().RefundCharge(t.Context(), newKey(), apiclient.RefundInput{ChargeId: paid.Charge.Id, Amount: new(1000), Reason: new(reason)})
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", refund.Status)

	const query = `query($key: String!, $session: String) { chargeStatus(idempotencyKey: $key, checkoutSession: $session) {
		charge { amount amountRefunded refunds { amount status reason } } } }`
	read := func(apiKey string) map[string]any {
		body, err := json.Marshal(map[string]any{"query": query, "variables": map[string]any{"key": key, "session": secret}})
		require.NoError(t, err)
		r := s.send(t, http.MethodPost, "/graphql", http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + apiKey}}, bytes.NewReader(body))
		answer := r.gql(t)
		require.Empty(t, answer.Errors, "%s", r.body)
		var data struct {
			ChargeStatus struct {
				Charge map[string]any `json:"charge"`
			} `json:"chargeStatus"`
		}
		require.NoError(t, json.Unmarshal(answer.Data, &data))
		return data.ChargeStatus.Charge
	}
	shopper := read(demoPublishableKey)
	require.Equal(t, 2500.0, shopper["amount"])
	require.Equal(t, 1000.0, shopper["amountRefunded"], "the shopper sees what came back")
	refunds := shopper["refunds"].([]any)
	require.Len(t, refunds, 1)
	require.Equal(t, map[string]any{"amount": 1000.0, "status": "SUCCEEDED", "reason": nil}, refunds[0], "but not why")

	merchant := read(apiclient.DemoAPIKey)
	require.Equal(t, reason, merchant["refunds"].([]any)[0].(map[string]any)["reason"], "the merchant reads its own record")
}

// TestKeys_APageKeysItsOwnSession_NoSquattingNoOracle: a page's keys are
// its session's. A page that pays under a key the merchant's server will
// use later (for a refund, say) takes nothing from the merchant; a paid
// session answers every new key of its own alike, whether the merchant
// used it or not; and keys beginning with chargeonce_, reserved for
// chargeonce's own refunds, are refused from every caller.
func TestKeys_APageKeysItsOwnSession_NoSquattingNoOracle(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t)})
	page := s.clientFrom("127.0.0.2", demoPublishableKey)
	ctx := t.Context()

	// The page squats the key the merchant will refund under.
	secret := s.openSession(t, 3000)
	squatted := "refund-order-77-" + newKey()
	res, err := page.ChargeCard(ctx, squatted, apiclient.ChargeCardInput{PaymentMethod: "pm_card_visa", CheckoutSession: &secret})
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", res.Status)
	refund, err := s.demo().RefundCharge(ctx, squatted, apiclient.RefundInput{ChargeId: res.Charge.Id, Amount: new(500)})
	require.NoError(t, err, "the merchant's key is the merchant's")
	require.Equal(t, "SUCCEEDED", refund.Status)
	again, err := page.ChargeCard(ctx, squatted, apiclient.ChargeCardInput{PaymentMethod: "pm_card_visa", CheckoutSession: &secret})
	require.NoError(t, err)
	require.True(t, again.Replayed, "and the page's key is still the page's: its retry is a replay")
	require.Equal(t, res.Charge.Id, again.Charge.Id)

	// A key the merchant used, and one nobody used, on the paid session:
	// one answer for both.
	used := newKey()
	_, err = s.demo().ChargeCard(ctx, used, visa(700))
	require.NoError(t, err)
	for _, key := range []string{used, squatted + "-2", newKey()} {
		_, err := page.ChargeCard(ctx, key, apiclient.ChargeCardInput{PaymentMethod: "pm_card_visa", CheckoutSession: &secret})
		require.Equal(t, "CHECKOUT_SESSION_PAID", apiclient.Code(err), "key %s", key)
		status, err := page.SessionChargeStatus(ctx, key, secret)
		require.NoError(t, err)
		require.Nil(t, status, "key %s: nothing to read", key)
	}

	// Reserved keys, from every caller and every operation that takes one.
	reserved := "chargeonce_late_" + newKey()
	_, err = s.demo().ChargeCard(ctx, reserved, visa(100))
	requireReservedKey(t, err)
	_, err = s.demo().RefundCharge(ctx, reserved, apiclient.RefundInput{ChargeId: res.Charge.Id, Amount: new(100)})
	requireReservedKey(t, err)
	_, err = s.demo().CreateCheckoutSession(ctx, reserved, apiclient.CheckoutSessionInput{Amount: 100, Currency: "USD"})
	requireReservedKey(t, err)
	_, err = page.ChargeCard(ctx, reserved, apiclient.ChargeCardInput{PaymentMethod: "pm_card_visa", CheckoutSession: new(s.openSession(t, 100))})
	requireReservedKey(t, err)
}

// requireReservedKey requires err to refuse an idempotency key as reserved.
func requireReservedKey(t *testing.T, err error) {
	t.Helper()
	var e *apiclient.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "BAD_USER_INPUT", e.Code())
	require.Equal(t, "idempotencyKey", e.Field())
	require.Contains(t, e.Errors[0].Message, "reserved")
}

// TestDoor_UnderEveryAttackAtOnce_HonestShoppersPayOnce: honest shoppers on
// six addresses pay their carts while strangers, at once, send hostile
// documents (row 1 of SECURITY.md's public door), a wave of declines from
// one address (3), declines rotated over 20 addresses (4), 1,000
// subscribes on one socket (6), and keyless upgrades and a hundred held
// sockets (8). Every shopper pays, each charge reaches the provider once,
// the attacks are held to their bounds, and the server stays within its
// memory.
func TestDoor_UnderEveryAttackAtOnce_HonestShoppersPayOnce(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	runCommand(t, map[string]string{"DATABASE_URL": dbURL}, "merchant", "origins", "add", "demo", "https://shop.example").requireOK(t)

	// What the merchant's server opened before the day began.
	const shoppers, carts = 6, 3
	cart := make([][]string, shoppers)
	for i := range cart {
		for j := range carts {
			cart[i] = append(cart[i], s.openSession(t, 1000+10*i+j))
		}
	}
	wave := make([]string, 30)
	for i := range wave {
		wave[i] = s.openSession(t, 300+i)
	}
	rotating := make([]string, 20)
	for i := range rotating {
		rotating[i] = s.openSession(t, 600+i)
	}
	waitingSecret, err := s.demo().CreateCheckoutSession(t.Context(), newKey(),
		apiclient.CheckoutSessionInput{Amount: 900, Currency: "USD", ReturnUrl: new("https://shop.example/return")})
	require.NoError(t, err)
	waitingKey, status := s.payFrom(t.Context(), s.clientFrom("127.0.7.3", demoPublishableKey), *waitingSecret.ClientSecret, "pm_card_authenticationRequired")
	require.Equal(t, apiclient.Processing, status)

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var attacks sync.WaitGroup
	// Row 1: 64 KiB of one repeated field, keyless, over and over.
	var hostile atomic.Int32
	attacks.Go(func() {
		body, _ := json.Marshal(map[string]string{"query": "{" + strings.Repeat("__typename ", 5900) + "}"})
		c := graphtest.ClientFrom("127.0.7.1")
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
				hostile.Add(1)
			}
		}
	})
	// Row 3: 30 declines at once from one address.
	waveKeys := make([]string, len(wave))
	attacks.Go(func() {
		var wg sync.WaitGroup
		page := s.clientFrom("127.0.7.2", demoPublishableKey)
		for i, secret := range wave {
			wg.Go(func() { waveKeys[i], _ = s.payFrom(ctx, page, secret, "pm_card_chargeDeclined") })
		}
		wg.Wait()
	})
	// Row 4: four declines from each of 20 addresses.
	for i, secret := range rotating {
		page := s.clientFrom(fmt.Sprintf("127.0.8.%d", i+1), demoPublishableKey)
		attacks.Go(func() {
			for range 4 {
				s.payFrom(ctx, page, secret, "pm_card_chargeDeclined")
			}
		})
	}
	// Row 6: 1,000 subscribes on one socket to its own waiting attempt.
	var served atomic.Int32
	attacks.Go(func() {
		ws, _, err := graphtest.TryDialWS(ctx, graphtest.ClientFrom("127.0.7.3"), s.URL, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		go func() {
			<-ctx.Done()
			ws.CloseNow()
		}()
		if ack, err := ws.TryInit(ctx, demoPublishableKey); err != nil || ack.Type != "connection_ack" {
			return
		}
		for i := range 1000 {
			if ws.TrySubscribe(ctx, strconv.Itoa(i), sessionChargeUpdated, map[string]any{"key": waitingKey, "session": *waitingSecret.ClientSecret}) != nil {
				return
			}
		}
		for {
			f, err := ws.TryRead(ctx)
			if err != nil {
				return
			}
			if f.Type == "next" && !strings.Contains(string(f.Payload), `"errors"`) {
				served.Add(1)
			}
		}
	})
	// Row 8: 60 keyless upgrades from one address, and 100 sockets held
	// open with the publishable key from another.
	var upgraded, held atomic.Int32
	attacks.Go(func() {
		for range 60 {
			if ws, _, err := graphtest.TryDialWS(ctx, graphtest.ClientFrom("127.0.7.4"), s.URL, nil); err == nil {
				upgraded.Add(1)
				defer ws.CloseNow()
			}
		}
		for range 100 {
			ws, _, err := graphtest.TryDialWS(ctx, graphtest.ClientFrom("127.0.7.5"), s.URL, nil)
			if err != nil {
				continue
			}
			defer ws.CloseNow()
			if ack, err := ws.TryInit(ctx, demoPublishableKey); err == nil && ack.Type == "connection_ack" {
				held.Add(1)
			}
		}
		<-ctx.Done()
	})

	// The honest shoppers, meanwhile: each pays its carts, one after the
	// other, and reads each outcome back.
	paidKeys := make([][]string, shoppers)
	outcomes := make([][]string, shoppers)
	var shopping sync.WaitGroup
	for i := range shoppers {
		page := s.clientFrom(fmt.Sprintf("127.0.6.%d", i+1), demoPublishableKey)
		shopping.Go(func() {
			for _, secret := range cart[i] {
				key, outcome := s.payFrom(t.Context(), page, secret, "pm_card_visa")
				if outcome == apiclient.Succeeded {
					if read, err := page.SessionChargeStatus(t.Context(), key, secret); err != nil || read == nil || read.Status != apiclient.Succeeded {
						outcome = "not read back"
					}
				}
				paidKeys[i] = append(paidKeys[i], key)
				outcomes[i] = append(outcomes[i], outcome)
			}
		})
	}
	shopping.Wait()
	stop()
	attacks.Wait()

	for i := range shoppers {
		for j, outcome := range outcomes[i] {
			require.Equal(t, apiclient.Succeeded, outcome, "shopper %d, cart %d", i, j)
			charges, err := s.demo().ProviderCharges(t.Context(), "", paidKeys[i][j])
			require.NoError(t, err)
			require.Len(t, charges, 1, "shopper %d, cart %d: one charge at the provider", i, j)
		}
	}
	reached := 0
	for _, key := range waveKeys {
		if key != "" {
			charges, err := s.demo().ProviderCharges(t.Context(), "", key)
			require.NoError(t, err)
			reached += len(charges)
		}
	}
	require.LessOrEqual(t, reached, 10, "the wave of declines reached the provider at most the address's burst")
	require.LessOrEqual(t, served.Load(), int32(5), "one socket holds at most STREAM_MAX_SUBSCRIPTIONS")
	require.LessOrEqual(t, upgraded.Load(), int32(20), "keyless upgrades held to the address's burst")
	require.LessOrEqual(t, held.Load(), int32(20), "sockets held to STREAM_MAX_PER_ADDRESS")
	require.Positive(t, hostile.Load())
	rss := residentBytes(t, s.PID())
	t.Logf("hostile documents sent %d; declines reaching the provider from the wave %d; subscriptions served %d; keyless upgrades %d; sockets held %d; server RSS %d MiB",
		hostile.Load(), reached, served.Load(), upgraded.Load(), held.Load(), rss>>20)
	require.Less(t, rss, int64(256<<20), "the server stays within its memory")
}
