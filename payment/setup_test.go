package payment

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// The fixture of payment's tests: a service on a fresh database, charging
// an in-memory provider, with a clock the test moves.

// MemoryProvider is providertest's in-memory provider (providertest.Memory)
// as these tests drive and observe it: the ground truth they count. Its
// cards are the tokens the tests name (pm_card_visa, pm_card_lostResponse…).
type MemoryProvider interface {
	Provider
	// Charges are the charges held whose metadata holds value under
	// metadataKey ("": all), oldest first, as they are now.
	Charges(metadataKey, value string) []ProviderCharge
	// ChargeKeys are the provider keys of the charges held, one per charge.
	ChargeKeys() []string
	// ChargeStatus is a charge's status: succeeded, failed,
	// requires_action or canceled.
	ChargeStatus(id string) string
	// RefundsHeld counts a charge's refunds that are pending or
	// succeeded, and adds up their amounts.
	RefundsHeld(chargeID string) (n int, amount int64)
	// Captures and Voids are a charge's, oldest first, as found.
	Captures(chargeID string) []ProviderCapture
	Voids(chargeID string) []ProviderVoid
	// KeysSent are the provider keys of every send (charge, refund,
	// capture, void), in order, repeats included.
	KeysSent() []string
	// PressChallenge presses "complete" or "fail" on a waiting charge's
	// challenge, as the shopper does, and returns where they are sent back.
	PressChallenge(challengeURL, button string) (*url.URL, error)
}

// NewMemoryProvider returns an in-memory provider on the clock now, whose
// pm_card_slow takes slow. providertest imports this package, so only the
// external test package can import it: memory_external_test.go sets this.
var NewMemoryProvider func(now func() time.Time, slow time.Duration) MemoryProvider

// newMemory is NewMemoryProvider(now, slow), for a test.
func newMemory(t testing.TB, now func() time.Time, slow time.Duration) MemoryProvider {
	t.Helper()
	if NewMemoryProvider == nil {
		t.Fatal("payment: NewMemoryProvider is not set (memory_external_test.go sets it)")
	}
	return NewMemoryProvider(now, slow)
}

// testClock is a clock the test moves by hand.
type testClock struct{ now atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.now.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.now.Load()) }
func (c *testClock) Advance(d time.Duration) { c.now.Add(int64(d)) }
func (c *testClock) AdvancePast(t time.Time) { c.now.Store(t.Add(time.Millisecond).UnixNano()) }

type bundle struct {
	pool     *pgxpool.Pool
	clock    *testClock
	svc      *Service
	merchant Merchant
	provider MemoryProvider
}

// setup gives a service on a fresh database, charging an in-memory
// provider, with a clock the test controls, which the provider's refunds
// and authorizations keep too.
func setup(t testing.TB, cfg Config) *bundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	clock := newTestClock()
	cfg.Now = clock.Now
	provider := newMemory(t, clock.Now, 50*time.Millisecond)
	svc := NewService(pool, provider, cfg)
	m, err := newMerchant(context.Background(), pool, "demo")
	require.NoError(t, err)
	return &bundle{pool: pool, clock: clock, svc: svc, merchant: m, provider: provider}
}

func visa(amount int64) ChargeInput {
	return ChargeInput{Amount: amount, Currency: "USD", PaymentMethod: "pm_card_visa"}
}

func card(pm string) ChargeInput {
	in := visa(1999)
	in.PaymentMethod = pm
	return in
}

// abandon claims an attempt as a request would, then "dies": the provider is
// never called, and the lease runs until the clock passes it.
func (b *bundle) abandon(t *testing.T, key string, in ChargeInput) Attempt {
	t.Helper()
	c, err := b.svc.store.claim(context.Background(),
		newChargeAttempt(b.merchant, key, in, b.clock.Now(), b.svc.cfg.Lease, b.svc.cfg.Retention), SessionMaxAttemptsDefault)
	require.NoError(t, err)
	require.Equal(t, claimedByUs, c.outcome)
	return c.attempt
}

func (b *bundle) status(t *testing.T, key string) *Result {
	t.Helper()
	r, err := b.svc.ChargeStatus(context.Background(), b.merchant, key)
	require.NoError(t, err)
	require.NotNil(t, r)
	return r
}

// providerCharges counts the provider's succeeded charges for the client
// key key, whatever our provider keys.
func (b *bundle) providerCharges(t *testing.T, key string) int {
	t.Helper()
	return countSucceeded(b.provider.Charges("client_idempotency_key", key))
}

// countSucceeded counts the charges that succeeded.
func countSucceeded(charges []ProviderCharge) int {
	n := 0
	for _, c := range charges {
		if c.Succeeded {
			n++
		}
	}
	return n
}

// providerRefunds counts the provider's refunds of c that are pending or
// succeeded, and adds up their amounts.
func (b *bundle) providerRefunds(t *testing.T, c *Charge) (n int, sum int64) {
	t.Helper()
	return b.provider.RefundsHeld(c.ProviderChargeID)
}

// refunded is what the service says c has refunded.
func (b *bundle) refunded(t *testing.T, c *Charge) int64 {
	t.Helper()
	refunded, _, err := b.svc.Refunds(context.Background(), b.merchant, c.ID)
	require.NoError(t, err)
	return refunded
}

// events counts key's outbox events of type.
func (b *bundle) events(t *testing.T, key, eventType string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM charge_events WHERE idempotency_key = $1 AND type = $2`, key, eventType).Scan(&n))
	return n
}

func countOf(t *testing.T, b *bundle, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

func attemptID(t *testing.T, b *bundle, key string) string {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, b.pool.QueryRow(context.Background(),
		"SELECT id FROM charge_attempts WHERE idempotency_key = $1", key).Scan(&id))
	return id.String()
}

// countingProvider counts the calls to the provider it wraps.
type countingProvider struct {
	Provider
	creates, finds, cancels atomic.Int32
	refundCreates           atomic.Int32
}

func (p *countingProvider) CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error) {
	p.creates.Add(1)
	return p.Provider.CreateCharge(ctx, req)
}

func (p *countingProvider) FindCharges(ctx context.Context, req ProviderChargeRequest) ([]ProviderCharge, error) {
	p.finds.Add(1)
	return p.Provider.FindCharges(ctx, req)
}

func (p *countingProvider) CancelCharge(ctx context.Context, req ProviderChargeRequest, id string) (ProviderCharge, error) {
	p.cancels.Add(1)
	return p.Provider.CancelCharge(ctx, req, id)
}

func (p *countingProvider) CreateRefund(ctx context.Context, req ProviderRefundRequest) (ProviderRefund, error) {
	p.refundCreates.Add(1)
	return p.Provider.CreateRefund(ctx, req)
}

// setupCounting is setup with the provider's calls counted.
func setupCounting(t *testing.T, cfg Config) (*bundle, *countingProvider) {
	t.Helper()
	b := setup(t, cfg)
	counting := &countingProvider{Provider: b.provider}
	b.svc = NewService(b.pool, counting, b.svc.cfg)
	return b, counting
}

// reconcileAtOnce runs a reconciler pass of every instance at once, passes
// times over.
func reconcileAtOnce(t *testing.T, instances []*Service, passes int) {
	t.Helper()
	for range passes {
		var wg sync.WaitGroup
		for _, svc := range instances {
			wg.Go(func() {
				_, err := NewReconciler(svc, ReconcilerConfig{}).RunOnce(context.Background())
				require.NoError(t, err)
			})
		}
		wg.Wait()
	}
}

// newMerchant stores a merchant named name, as package merchant would.
func newMerchant(ctx context.Context, pool *pgxpool.Pool, name string) (Merchant, error) {
	m := Merchant{ID: uuid.New(), Name: name}
	_, err := pool.Exec(ctx, "INSERT INTO merchants (id, name) VALUES ($1, $2)", m.ID, m.Name)
	return m, err
}
