package payment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

func TestNextProviderKey_IsDerivedFromTheAttemptAndNumbered(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0b5e3c1a-7d7e-4c55-9a3c-6d0f2a4e9b11")
	a := Attempt{ID: id, ProviderKey: "chargeonce_" + id.String()}
	require.Equal(t, "chargeonce_"+id.String()+"_2", nextProviderKey(a))
	a.ProviderKey = nextProviderKey(a)
	require.Equal(t, "chargeonce_"+id.String()+"_3", nextProviderKey(a))
	a.ProviderKey = "chargeonce_" + id.String() + "_17"
	require.Equal(t, "chargeonce_"+id.String()+"_18", nextProviderKey(a))
}

// spendingProvider plays a provider that spends the first key it is sent
// (as Stripe does when it saves a 500 for it) and charges under any other.
// On every send it checks that the key sent is the one stored on the
// attempt: a new key must be recorded before it is used.
type spendingProvider struct {
	Provider  // nil: only charges are sent
	t         *testing.T
	db        func(ctx context.Context, attemptID uuid.UUID) string // the stored provider key
	mu        sync.Mutex
	spent     map[string]bool
	sends     []string
	charges   map[string]string // provider key → charge id
	findCalls int
}

func (p *spendingProvider) CreateCharge(ctx context.Context, req ProviderChargeRequest) (ProviderCharge, error) {
	stored := p.db(ctx, req.AttemptID)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sends = append(p.sends, req.IdempotencyKey)
	require.Equal(p.t, stored, req.IdempotencyKey, "a key is recorded on the attempt before it is sent")
	if len(p.spent) == 0 {
		p.spent[req.IdempotencyKey] = true
	}
	if p.spent[req.IdempotencyKey] {
		return ProviderCharge{}, ErrProviderKeySpent
	}
	id := "pi_" + req.IdempotencyKey
	p.charges[req.IdempotencyKey] = id
	return ProviderCharge{ID: id, Succeeded: true}, nil
}

func (p *spendingProvider) CancelCharge(context.Context, ProviderChargeRequest, string) (ProviderCharge, error) {
	return ProviderCharge{}, errors.New("no charge of this provider waits")
}

func (p *spendingProvider) FindCharges(ctx context.Context, req ProviderChargeRequest) ([]ProviderCharge, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.findCalls++
	var found []ProviderCharge
	for _, id := range p.charges { // one at most
		found = append(found, ProviderCharge{ID: id, Succeeded: true})
	}
	return found, nil
}

func TestSettle_SpentProviderKey_IsReplacedBeforeTheResend(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx := context.Background()
	storedKey := func(ctx context.Context, id uuid.UUID) string {
		var key string
		require.NoError(t, pool.QueryRow(ctx, "SELECT charge_attempt_provider_key(a) FROM charge_attempts a WHERE id = $1", id).Scan(&key))
		return key
	}
	p := &spendingProvider{t: t, db: storedKey, spent: map[string]bool{}, charges: map[string]string{}}
	clock := newTestClock()
	svc := NewService(pool, p, Config{Now: clock.Now})
	m, err := newMerchant(ctx, pool, "demo")
	require.NoError(t, err)

	// The request's own send meets the spent key: the outcome stays open
	// (the request never rekeys; only a settling holder does).
	r, err := svc.ChargeCard(ctx, m, "k", visa(500))
	require.NoError(t, err)
	require.Equal(t, StatusProcessing, r.Status)
	var a Attempt
	a, err = svc.store.get(ctx, m.ID, uuid.Nil, "k")
	require.NoError(t, err)
	first := "chargeonce_" + a.ID.String()
	require.Equal(t, first, a.ProviderKey)
	require.Equal(t, []string{first}, p.sends, "a spent key is not retried inline")

	// The reconciler asks (nothing), re-sends under the same key (spent),
	// records the next key, and sends under it.
	clock.Advance(time.Millisecond)
	res, err := NewReconciler(svc, ReconcilerConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, ReconcileResult{Taken: 1, Succeeded: 1}, res)
	second := first + "_2"
	require.Equal(t, []string{first, first, second}, p.sends)
	done, err := svc.store.get(ctx, m.ID, uuid.Nil, "k")
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, done.Status)
	require.Equal(t, second, done.ProviderKey, "the attempt keeps the key its charge was made under")
	require.Equal(t, "pi_"+second, done.charge().Charge.ProviderChargeID)
	require.Equal(t, 1, p.findCalls)
}

func TestStore_Rekey_IsFencedOnAttemptAndKey(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	a := b.abandon(t, "k", visa(500))

	// A holder that lost the attempt to a takeover rekeys nothing.
	b.clock.AdvancePast(a.LockedUntil)
	taken, ok, err := b.svc.store.takeOver(ctx, a, b.clock.Now(), b.clock.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	_, err = b.svc.store.rekey(ctx, a, nextProviderKey(a))
	require.ErrorIs(t, err, errFenced, "the stale holder's fence is fenced off")

	// The holder rekeys once; a second rekey from the old key is fenced off.
	rekeyed, err := b.svc.store.rekey(ctx, taken, nextProviderKey(taken))
	require.NoError(t, err)
	require.Equal(t, nextProviderKey(taken), rekeyed.ProviderKey)
	_, err = b.svc.store.rekey(ctx, taken, nextProviderKey(taken))
	require.ErrorIs(t, err, errFenced, "a holder whose key is stale changes nothing")

	// A final attempt is never rekeyed.
	_, err = b.svc.store.failCharge(ctx, rekeyed, Failure{Code: "card_declined", Message: "declined"}, b.clock.Now(), b.clock.Now().Add(time.Hour), lateWatch{})
	require.NoError(t, err)
	_, err = b.svc.store.rekey(ctx, rekeyed, nextProviderKey(rekeyed))
	require.ErrorIs(t, err, errFenced)
}

// TestStore_FirstProviderKey_KeptAsNullReadAsTheIds: a claimed attempt's
// row keeps no first provider key (chargeonce_<id>, which its id gives),
// every read gives it, and a rekey keeps the next one; a row written before
// (its first key spelled out) reads and rekeys the same.
func TestStore_FirstProviderKey_KeptAsNullReadAsTheIds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	stored := func(id uuid.UUID) *string {
		var key *string
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT provider_key FROM charge_attempts WHERE id = $1", id).Scan(&key))
		return key
	}
	for i, spelledOut := range []bool{false, true} {
		a := b.abandon(t, fmt.Sprintf("k-%d", i), visa(500))
		first := "chargeonce_" + a.ID.String()
		require.Equal(t, first, a.ProviderKey)
		require.Nil(t, stored(a.ID), "the row keeps the first key")
		if spelledOut {
			_, err := b.pool.Exec(ctx, "UPDATE charge_attempts SET provider_key = $2 WHERE id = $1", a.ID, first)
			require.NoError(t, err)
		}
		read, err := b.svc.store.getByID(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, first, read.ProviderKey)

		rekeyed, err := b.svc.store.rekey(ctx, read, nextProviderKey(read))
		require.NoError(t, err)
		require.Equal(t, first+"_2", rekeyed.ProviderKey)
		require.Equal(t, first+"_2", *stored(a.ID))
	}
}

func (p *spendingProvider) CreateRefund(context.Context, ProviderRefundRequest) (ProviderRefund, error) {
	return ProviderRefund{}, errors.New("this provider refunds nothing")
}

func (p *spendingProvider) FindRefund(context.Context, ProviderRefundRequest) (*ProviderRefund, error) {
	return nil, errors.New("this provider refunds nothing")
}
