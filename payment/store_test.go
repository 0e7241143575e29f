package payment

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/sqlc"
)

// relayedBodies is what the relay's read of its batch
// (UnsentChargeEvents, each event with its charge joined) gives as the
// published body of every unsent event in pool's database, by id.
func relayedBodies(t *testing.T, pool *pgxpool.Pool) map[uuid.UUID]string {
	t.Helper()
	batch, err := sqlc.New(pool).UnsentChargeEvents(context.Background(), 1000)
	require.NoError(t, err)
	bodies := make(map[uuid.UUID]string, len(batch))
	for _, e := range batch {
		bodies[e.ID] = string(e.Body)
	}
	return bodies
}

func TestStore_FinalizeIsFencedOnAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s, m := storeWithMerchant(t, "fence")
	in := ChargeInput{Amount: 100, Currency: "USD", PaymentMethod: "pm_card_visa"}
	c, err := s.claim(ctx, newChargeAttempt(m, "k", in, time.Now(), time.Minute, time.Hour), SessionMaxAttemptsDefault)
	require.NoError(t, err)
	require.Equal(t, claimedByUs, c.outcome)
	a := c.attempt
	require.Equal(t, int32(1), a.Fence)

	other := in
	other.Amount = 200
	c, err = s.claim(ctx, newChargeAttempt(m, "k", other, time.Now(), time.Minute, time.Hour), SessionMaxAttemptsDefault)
	require.NoError(t, err)
	require.Equal(t, foundStored, c.outcome, "a second claim of the key gets nothing but the stored attempt")
	require.Equal(t, a.ID, c.attempt.ID)

	stale := a
	stale.Fence++
	_, _, err = s.succeed(ctx, stale, "ch_stale", chargeDetail{}, nil, time.Now(), time.Now().Add(time.Hour))
	require.ErrorIs(t, err, errFenced, "a holder with another fence writes nothing")
	_, err = s.failCharge(ctx, stale, Failure{Code: "card_declined", Message: "no"}, time.Now(), time.Now().Add(time.Hour), lateWatch{})
	require.ErrorIs(t, err, errFenced)

	done, _, err := s.succeed(ctx, a, "ch_real", chargeDetail{}, nil, time.Now(), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, done.Status)
	require.Equal(t, "ch_real", done.charge().Charge.ProviderChargeID)
	_, _, err = s.succeed(ctx, a, "ch_again", chargeDetail{}, nil, time.Now(), time.Now().Add(time.Hour))
	require.ErrorIs(t, err, errFenced, "a finalized attempt is never written again")
	_, err = s.failCharge(ctx, a, Failure{Code: "card_declined", Message: "no"}, time.Now(), time.Now().Add(time.Hour), lateWatch{})
	require.ErrorIs(t, err, errFenced)

	charges := dbtest.Query[string](t, pool, "SELECT provider_charge_id FROM charges ORDER BY created_at")
	require.Equal(t, []string{"ch_real"}, charges, "fenced writes left no charge behind")

	// The outbox: one event, the successful finalization's; the fenced
	// writes rolled theirs back with them.
	bodies := dbtest.Query[[]byte](t, pool, "SELECT charge_event_body(charge_events) FROM charge_events WHERE attempt_id = $1", a.ID)
	require.Len(t, bodies, 1, "one finalization, one event; fenced ones wrote none")
	e, err := ParseEvent(bodies[0])
	require.NoError(t, err)
	require.Equal(t, EventChargeSucceeded, e.Type)
	require.Equal(t, "ch_real", e.Charge.ProviderChargeID)
	require.Equal(t, done.charge().Charge.ID, e.Charge.ID)
	require.Equal(t, m.ID, e.MerchantID)
	require.Equal(t, "k", e.IdempotencyKey)
	require.Equal(t, int64(100), e.Amount)
}

func TestStore_FailedFinalizationWritesOneEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s, m := storeWithMerchant(t, "fail-event")
	in := ChargeInput{Amount: 250, Currency: "EUR", PaymentMethod: "pm_card_declined", OrderID: "o-1"}
	c, err := s.claim(ctx, newChargeAttempt(m, "k", in, time.Now(), time.Minute, time.Hour), SessionMaxAttemptsDefault)
	require.NoError(t, err)
	a := c.attempt

	// A finalization whose transaction rolls back after the status change
	// leaves neither the change nor an event: another session holds the
	// outbox locked, so the fail blocks on its event insert after its update
	// ran, and its deadline then aborts the whole transaction.
	locker, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = locker.Exec(ctx, "LOCK TABLE charge_events IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = s.failCharge(short, a, Failure{Code: "card_declined", Message: "declined"}, time.Now(), time.Now().Add(time.Hour), lateWatch{})
	cancel()
	require.Error(t, err)
	require.NoError(t, locker.Rollback(ctx))
	require.Equal(t, []string{"PROCESSING"}, dbtest.Query[string](t, pool, "SELECT status FROM charge_attempts WHERE id = $1", a.ID),
		"the status change rolled back with the event")
	require.Empty(t, dbtest.Query[[]byte](t, pool, "SELECT charge_event_body(charge_events) FROM charge_events"), "a rolled-back finalization wrote an event")

	done, err := s.failCharge(ctx, a, Failure{Code: "card_declined", Message: "declined"}, time.Now(), time.Now().Add(time.Hour), lateWatch{})
	require.NoError(t, err)
	require.Equal(t, StatusFailed, done.Status)
	bodies := dbtest.Query[[]byte](t, pool, "SELECT charge_event_body(charge_events) FROM charge_events WHERE attempt_id = $1 AND sent_at IS NULL", a.ID)
	require.Len(t, bodies, 1)
	e, err := ParseEvent(bodies[0])
	require.NoError(t, err)
	require.Equal(t, EventChargeFailed, e.Type)
	require.Equal(t, &EventFailure{Code: "card_declined", Message: "declined"}, e.Failure)
	require.Nil(t, e.Charge)
	require.Equal(t, "o-1", e.OrderID)
	require.Equal(t, "EUR", e.Currency)
}

func TestStore_ClaimOfAUsedKey_ReadsTheStoredAttemptInTheSameStatement(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	first, err := b.svc.ChargeCard(ctx, b.merchant, "k", visa(700))
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, first.Status)

	c, err := b.svc.store.claim(ctx, newChargeAttempt(b.merchant, "k", visa(700), time.Now(), time.Minute, time.Hour), SessionMaxAttemptsDefault)
	require.NoError(t, err)
	require.Equal(t, foundStored, c.outcome)
	got := c.attempt
	require.Equal(t, StatusSucceeded, got.Status, "the claim's statement read the stored attempt")
	require.Equal(t, first.Charge, got.charge().Charge, "with its charge")
	require.Equal(t, Fingerprint(visa(700)), got.Fingerprint)

	c, err = b.svc.store.claim(ctx, newChargeAttempt(b.merchant, "fresh", visa(700), time.Now(), time.Minute, time.Hour), SessionMaxAttemptsDefault)
	require.NoError(t, err)
	require.Equal(t, claimedByUs, c.outcome)
	require.Equal(t, StatusProcessing, c.attempt.Status)
	require.Nil(t, c.attempt.charge().Charge)
}

// A fenced write reads its one row by the primary key however many
// attempts are in flight, never by scanning the lease index (which holds
// every attempt in flight and, until vacuum, the ones finalized since):
// with the planner's generic plan, as the server's prepared statements
// get it, before and after the statistics see 300 attempts in flight.
func TestStore_FencedWrite_ReadsItsRowByThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s, m := storeWithMerchant(t, "plan")
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `PREPARE fenced(uuid, integer) AS
		UPDATE charge_attempts SET status = 'FAILED', failure_code = 'x', completed_at = now()
		WHERE id = $1 AND status = 'PROCESSING' AND fence = $2`)
	require.NoError(t, err)
	plan := func() string {
		var p string
		require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE fenced('00000000-0000-0000-0000-000000000000', 1)").Scan(&p))
		return p
	}
	for i := range 300 {
		_, err := s.claim(ctx, newChargeAttempt(m, fmt.Sprint("k", i), visa(100), time.Now(), time.Minute, time.Hour), SessionMaxAttemptsDefault)
		require.NoError(t, err)
	}
	require.Contains(t, plan(), `"Index Name": "charge_attempts_pkey"`)
	_, err = conn.Exec(ctx, "ANALYZE charge_attempts")
	require.NoError(t, err)
	require.Contains(t, plan(), `"Index Name": "charge_attempts_pkey"`, "with 300 attempts in flight")
	require.NotContains(t, plan(), "charge_attempts_lease_idx")
}

// Retention forgets the events written and sent before its cutoff, and
// reads them by id up to the cutoff's floor: idFloor(t) is above every id
// made before t and at or below every id made from t on.
func TestIDFloor_SeparatesTheIDsMadeBeforeATimeFromTheRest(t *testing.T) {
	t.Parallel()
	before := newID()
	time.Sleep(2 * time.Millisecond)
	at := time.Now()
	floor := idFloor(at)
	after := newID()
	require.Negative(t, bytes.Compare(before[:], floor[:]), "an id made before the time is below its floor")
	require.GreaterOrEqual(t, bytes.Compare(after[:], floor[:]), 0, "an id made from the time on is not")
	require.Equal(t, idFloor(at.Truncate(time.Millisecond)), floor, "the floor is the time's millisecond")
}

// wholeSHA256 is in's fingerprint as attempts stored before
// fingerprintSize kept it: the whole SHA-256.
func wholeSHA256(in ChargeInput) []byte {
	canonical, err := json.Marshal(struct {
		Version       int    `json:"v"`
		Amount        int64  `json:"amount"`
		Currency      string `json:"currency"`
		PaymentMethod string `json:"paymentMethod"`
		OrderID       string `json:"orderId"`
		Description   string `json:"description"`
	}{1, in.Amount, in.Currency, in.PaymentMethod, in.OrderID, in.Description})
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(canonical)
	return sum[:]
}

// A key claimed by a transaction that commits while the claim waits on it
// is invisible to the claim's snapshot: the statement returns nothing, and
// ChargeCard reads the key again rather than answer an error. The attempt
// was stored with its fingerprint whole, as before fingerprintSize: its
// retry still matches it.
func TestChargeCard_KeyCommittedAfterTheClaimsSnapshot_IsReadAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()

	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// Another request's claim and its decline, not yet committed.
	_, err = tx.Exec(ctx, `INSERT INTO charge_attempts (id, merchant_id, idempotency_key, fingerprint, provider_key,
		amount, currency, payment_method, status, failure_code, failure_message, completed_at, locked_until, expires_at)
		VALUES ($1, $2, 'raced', $3, 'chargeonce_' || $1::uuid, 800, 'USD', 'pm_card_visa', 'FAILED', 'card_declined', 'declined',
		now(), now(), now() + interval '1 hour')`, uuid.New(), b.merchant.ID, wholeSHA256(visa(800)))
	require.NoError(t, err)

	type answer struct {
		r   Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := b.svc.ChargeCard(ctx, b.merchant, "raced", visa(800))
		done <- answer{r, err}
	}()
	// The claim waits on the uncommitted row of the same key.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, []int64{1}, dbtest.Query[int64](c, b.pool, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%WITH claimed AS%'`))
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, tx.Commit(ctx))

	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, StatusFailed, got.r.Status)
	require.True(t, got.r.Replayed)
	require.Equal(t, "card_declined", got.r.Failure.Code)
}

// storeWithMerchant is a store on a database of its own, with merchant
// name in it.
func storeWithMerchant(t *testing.T, name string) (*pgxpool.Pool, *store, Merchant) {
	t.Helper()
	pool := dbtest.NewPool(t)
	m, err := newMerchant(context.Background(), pool, name)
	require.NoError(t, err)
	return pool, newStore(pool), m
}
