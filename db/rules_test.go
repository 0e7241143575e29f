package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// TestRules_EachRowThatBreaksARule_IsRefusedNamingIt: the rules of the
// tables every charge writes (migration 00025, PL/pgSQL functions called by
// one CHECK per table) refuse a row that breaks any of them, as a
// check_violation that names the rule, as the CHECK constraints they
// replaced did. Each update breaks one rule of a row that keeps them all.
func TestRules_EachRowThatBreaksARule_IsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	args := pgx.NamedArgs{"merchant": uuid.New(), "charge": uuid.New(), "attempt": uuid.New(), "event": uuid.New(), "session": uuid.New()}
	for _, q := range []string{
		`INSERT INTO merchants (id, name) VALUES (@merchant, 'rules')`,
		`INSERT INTO charges (id, merchant_id, amount, currency, provider_charge_id) VALUES (@charge, @merchant, 1999, 'USD', 'ch_rules')`,
		`INSERT INTO charge_attempts (id, merchant_id, idempotency_key, fingerprint, provider_key, amount, currency, payment_method, expires_at)
		 VALUES (@attempt, @merchant, 'rules-key', '\x00', 'chargeonce_' || @attempt::uuid, 1999, 'USD', 'pm_card_visa', now() + interval '1 day')`,
		`INSERT INTO checkout_sessions (id, merchant_id, idempotency_key, fingerprint, client_secret_hash, amount, currency, created_at, expires_at)
		 VALUES (@session, @merchant, 'rules-session', '\x00', '\x00', 1999, 'USD', now(), now() + interval '1 hour')`,
		`INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, body, occurred_at)
		 VALUES (@event, 'charge.succeeded', @merchant, 'rules-key', @attempt, '{}', now())`,
	} {
		_, err := pool.Exec(ctx, q, args)
		require.NoError(t, err, "a row that keeps every rule: %s", q)
	}

	for _, tc := range []struct{ rule, update string }{
		{"charge_attempts_amount_check", `UPDATE charge_attempts SET amount = 0 WHERE id = @attempt`},
		{"charge_attempts_idempotency_key_check", `UPDATE charge_attempts SET idempotency_key = '' WHERE id = @attempt`},
		{"charge_attempts_status_check", `UPDATE charge_attempts SET status = 'DONE' WHERE id = @attempt`},
		{"charge_attempts_kind_check", `UPDATE charge_attempts SET kind = 'gift' WHERE id = @attempt`},
		{"charge_attempts_check1", `UPDATE charge_attempts SET failure_code = 'card_declined' WHERE id = @attempt`},
		{"charge_attempts_check2", `UPDATE charge_attempts SET completed_at = now() WHERE id = @attempt`},
		{"charge_attempts_action_check", `UPDATE charge_attempts SET next_action_url = 'https://bank.example/3ds' WHERE id = @attempt`},
		{"charge_attempts_late_check", `UPDATE charge_attempts SET late_watch_until = now() WHERE id = @attempt`},
		{"charge_attempts_key_session_check", `UPDATE charge_attempts SET checkout_session_id = @session, key_session_id = gen_random_uuid() WHERE id = @attempt`},
		{"charge_attempts_capture_method_check", `UPDATE charge_attempts SET capture_method = 'automatic' WHERE id = @attempt`},
		{"charge_attempts_outcome_check", `UPDATE charge_attempts SET payment_method = NULL WHERE id = @attempt`},
		{"charge_attempts_provider_key_check", `UPDATE charge_attempts SET provider_key = 'chargeonce_' || gen_random_uuid() WHERE id = @attempt`},
		{"charge_attempts_provider_key_check", `UPDATE charge_attempts SET provider_key = provider_key || '_x' WHERE id = @attempt`},
		{"charges_amount_check", `UPDATE charges SET amount = 0 WHERE id = @charge`},
		{"charges_currency_check", `UPDATE charges SET currency = 'usd' WHERE id = @charge`},
		{"charges_capture_method_check", `UPDATE charges SET capture_method = 'later' WHERE id = @charge`},
		{"charges_refunds_check", `UPDATE charges SET amount_refunded = 1 WHERE id = @charge`},
		{"charges_captures_check", `UPDATE charges SET capture_reserved = 1 WHERE id = @charge`},
		{"charges_refund_due_check", `UPDATE charges SET refund_due_at = now() WHERE id = @charge`},
		{"charge_events_type_check", `UPDATE charge_events SET type = 'charge.teleported' WHERE id = @event`},
		{"charge_events_subject_check", `UPDATE charge_events SET attempt_id = NULL WHERE id = @event`},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := pool.Exec(ctx, tc.update, args)
			pgErr := requireRefused(t, err, "23514", tc.rule)
			require.Contains(t, pgErr.Message, `violates check constraint "`+tc.rule+`"`)
		})
	}
}

// TestRules_AMerchantWithPayments_IsNotDeleted: a merchant whose attempts,
// charges or events are stored cannot be deleted nor given another id
// (migration 00027's trigger, where foreign keys refused it before), and
// one without any can; an update that names the id writes its new values
// (00034).
func TestRules_AMerchantWithPayments_IsNotDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	for _, tc := range []struct{ constraint, insert string }{
		{"charge_attempts_merchant_id_fkey", `INSERT INTO charge_attempts (id, merchant_id, idempotency_key, fingerprint, provider_key, amount, currency, payment_method, expires_at)
			SELECT id, @merchant, 'k', '\x00', 'chargeonce_' || id, 1999, 'USD', 'pm_card_visa', now() + interval '1 day' FROM gen_random_uuid() id`},
		{"charges_merchant_id_fkey", `INSERT INTO charges (id, merchant_id, amount, currency, provider_charge_id)
			VALUES (gen_random_uuid(), @merchant, 1999, 'USD', 'ch_' || gen_random_uuid())`},
		{"charge_events_merchant_id_fkey", `INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, body, occurred_at)
			VALUES (gen_random_uuid(), 'charge.succeeded', @merchant, 'k', gen_random_uuid(), '{}', now())`},
	} {
		t.Run(tc.constraint, func(t *testing.T) {
			args := pgx.NamedArgs{"merchant": uuid.New(), "name": "keeps-" + uuid.NewString()[:8]}
			_, err := pool.Exec(ctx, `INSERT INTO merchants (id, name) VALUES (@merchant, @name)`, args)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, tc.insert, args)
			require.NoError(t, err)

			_, err = pool.Exec(ctx, `DELETE FROM merchants WHERE id = @merchant`, args)
			requireRefused(t, err, "23503", tc.constraint)
			_, err = pool.Exec(ctx, `UPDATE merchants SET id = gen_random_uuid() WHERE id = @merchant`, args)
			requireRefused(t, err, "23503", tc.constraint)
			var left int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM merchants WHERE id = @merchant`, args).Scan(&left))
			require.Equal(t, 1, left, "the merchant is still there")
		})
	}
	t.Run("without payments", func(t *testing.T) {
		id := uuid.New()
		_, err := pool.Exec(ctx, `INSERT INTO merchants (id, name) VALUES ($1, 'no-payments')`, id)
		require.NoError(t, err)
		// An update that names the id writes its new values (the trigger
		// fires on it); one that moves the id of a merchant without
		// payments moves it.
		_, err = pool.Exec(ctx, `UPDATE merchants SET id = id, name = 'renamed-' || id WHERE id = $1`, id)
		require.NoError(t, err)
		require.Equal(t, []string{"renamed-" + id.String()}, dbtest.Query[string](t, pool, `SELECT name FROM merchants WHERE id = $1`, id))
		moved := uuid.New()
		_, err = pool.Exec(ctx, `UPDATE merchants SET id = $2 WHERE id = $1`, id, moved)
		require.NoError(t, err)
		require.Equal(t, []string{"renamed-" + id.String()}, dbtest.Query[string](t, pool, `SELECT name FROM merchants WHERE id = $1`, moved))
		tag, err := pool.Exec(ctx, `DELETE FROM merchants WHERE id = $1`, moved)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
	})
}

// TestRules_AChargeOfAnAttempt_IsNotDeleted: a charge that an attempt
// names cannot be deleted nor given another id (migration 00031's trigger,
// where a foreign key refused it before); one that no attempt names can,
// and an update that leaves the id as it is goes through.
func TestRules_AChargeOfAnAttempt_IsNotDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	args := pgx.NamedArgs{"merchant": uuid.New(), "charge": uuid.New(), "loose": uuid.New(), "attempt": uuid.New()}
	for _, q := range []string{
		`INSERT INTO merchants (id, name) VALUES (@merchant, 'charge-keeps')`,
		`INSERT INTO charges (id, merchant_id, amount, currency, provider_charge_id)
		 VALUES (@charge, @merchant, 1999, 'USD', 'ch_' || @charge::uuid), (@loose, @merchant, 1999, 'USD', 'ch_' || @loose::uuid)`,
		`INSERT INTO charge_attempts (id, merchant_id, idempotency_key, fingerprint, provider_key, amount, currency, payment_method,
		                             status, charge_id, completed_at, expires_at)
		 VALUES (@attempt, @merchant, 'k', '\x00', 'chargeonce_' || @attempt::uuid, 1999, 'USD', 'pm_card_visa',
		         'SUCCEEDED', @charge, now(), now() + interval '1 day')`,
	} {
		_, err := pool.Exec(ctx, q, args)
		require.NoError(t, err, q)
	}
	_, err := pool.Exec(ctx, `DELETE FROM charges WHERE id = @charge`, args)
	requireRefused(t, err, "23503", "charge_attempts_charge_id_fkey")
	_, err = pool.Exec(ctx, `UPDATE charges SET id = gen_random_uuid() WHERE id = @charge`, args)
	requireRefused(t, err, "23503", "charge_attempts_charge_id_fkey")

	tag, err := pool.Exec(ctx, `UPDATE charges SET id = id, description = 'kept' WHERE id = @charge`, args)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	require.Equal(t, []string{"kept"}, dbtest.Query[string](t, pool, `SELECT description FROM charges WHERE id = $1`, args["charge"]),
		"an update that keeps the id writes its new values")
	tag, err = pool.Exec(ctx, `DELETE FROM charges WHERE id = @loose`, args)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

// requireRefused asserts that err is PostgreSQL's refusal with SQLSTATE code
// on the constraint named constraint, and returns it.
func requireRefused(t *testing.T, err error, code, constraint string) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "refused: %v", err)
	require.Equal(t, code, pgErr.Code, pgErr.Message)
	require.Equal(t, constraint, pgErr.ConstraintName)
	return pgErr
}
