-- +goose Up
-- The rules of the three tables every charge writes (charge_attempts,
-- charges, charge_events) move from CHECK constraints into one PL/pgSQL
-- function per table, called by a single CHECK on the whole row. The rules
-- are the same, word for word, and a row that breaks one is refused as
-- before: a check_violation (23514) naming the rule it broke
-- ("charges_captures_check", …) as its constraint.
--
-- Why: PostgreSQL reads a table's CHECK constraints from their stored text
-- and plans them again for every statement that writes the table (17 KB of
-- node text for charge_attempts, 6.5 KB each for charges and
-- charge_events). In a profile of a fresh charge's two statements that was
-- a fifth of PostgreSQL's CPU. A PL/pgSQL function plans its expressions
-- once per connection and keeps them (docs/performance.md).
--
-- A change to a rule is a CREATE OR REPLACE of its table's function in a
-- new migration. The functions name the columns they read: a migration
-- that drops or renames one of them changes the function with it.

-- +goose StatementBegin
CREATE FUNCTION charge_attempts_rules(r charge_attempts) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF (r.amount > 0) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_amount_check',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_amount_check"';
    END IF;
    IF (length(r.idempotency_key) BETWEEN 1 AND 255) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_idempotency_key_check',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_idempotency_key_check"';
    END IF;
    IF (r.status IN ('PROCESSING', 'SUCCEEDED', 'FAILED')) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_status_check',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_status_check"';
    END IF;
    IF (r.kind IN ('charge', 'refund', 'capture', 'void')) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_kind_check',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_kind_check"';
    END IF;
    IF ((r.status = 'FAILED') = (r.failure_code IS NOT NULL)) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_check1',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_check1"';
    END IF;
    IF ((r.status = 'PROCESSING') = (r.completed_at IS NULL)) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_check2',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_check2"';
    END IF;
    IF ((r.next_action_url IS NULL) = (r.action_since IS NULL) AND (r.action_since IS NULL) = (r.action_checked_at IS NULL)
        AND (r.next_action_url IS NULL OR r.return_url IS NOT NULL)) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_action_check',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_action_check"';
    END IF;
    IF ((r.late_check_at IS NULL OR r.late_watch_until IS NOT NULL)
        AND (r.late_watch_until IS NULL OR (r.status = 'FAILED' AND r.kind = 'charge'))) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_late_check',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_late_check"';
    END IF;
    IF (r.key_session_id IS NULL OR r.key_session_id = r.checkout_session_id) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_key_session_check',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_key_session_check"';
    END IF;
    IF (r.capture_method = 'manual') IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_capture_method_check',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_capture_method_check"';
    END IF;
    IF (CASE r.kind
            WHEN 'charge' THEN (r.status = 'SUCCEEDED') = (r.charge_id IS NOT NULL) AND r.payment_method IS NOT NULL
                AND r.refund_id IS NULL AND r.pending_since IS NULL AND r.capture_id IS NULL
            WHEN 'refund' THEN r.charge_id IS NOT NULL AND (r.status = 'SUCCEEDED') = (r.refund_id IS NOT NULL)
                AND r.payment_method IS NULL AND r.order_id IS NULL AND r.checkout_session_id IS NULL
                AND r.return_url IS NULL AND r.next_action_url IS NULL AND r.capture_id IS NULL
            WHEN 'capture' THEN r.charge_id IS NOT NULL AND r.capture_final IS NOT NULL
                AND (r.status = 'SUCCEEDED') = (r.capture_id IS NOT NULL) AND r.refund_id IS NULL
                AND r.payment_method IS NULL AND r.checkout_session_id IS NULL AND r.next_action_url IS NULL
            WHEN 'void' THEN r.charge_id IS NOT NULL AND r.capture_id IS NULL AND r.refund_id IS NULL
                AND r.payment_method IS NULL AND r.checkout_session_id IS NULL AND r.next_action_url IS NULL
        END) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_outcome_check',
            MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_outcome_check"';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION charges_rules(r charges) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF (r.amount > 0) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charges', CONSTRAINT = 'charges_amount_check',
            MESSAGE = 'new row for relation "charges" violates check constraint "charges_amount_check"';
    END IF;
    IF (r.currency ~ '^[A-Z]{3}$') IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charges', CONSTRAINT = 'charges_currency_check',
            MESSAGE = 'new row for relation "charges" violates check constraint "charges_currency_check"';
    END IF;
    IF (r.capture_method IN ('automatic', 'manual')) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charges', CONSTRAINT = 'charges_capture_method_check',
            MESSAGE = 'new row for relation "charges" violates check constraint "charges_capture_method_check"';
    END IF;
    IF (0 <= r.amount_refunded AND r.amount_refunded <= r.amount_reserved
        AND r.amount_reserved <= CASE r.capture_method WHEN 'manual' THEN r.amount_captured ELSE r.amount END) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charges', CONSTRAINT = 'charges_refunds_check',
            MESSAGE = 'new row for relation "charges" violates check constraint "charges_refunds_check"';
    END IF;
    IF (0 <= r.amount_captured AND r.amount_captured <= r.capture_reserved AND r.capture_reserved <= r.amount
        AND NOT (r.void_claimed AND r.capture_reserved > 0)
        AND (r.capture_method = 'manual' OR (r.capture_reserved = 0 AND NOT r.void_claimed))) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charges', CONSTRAINT = 'charges_captures_check',
            MESSAGE = 'new row for relation "charges" violates check constraint "charges_captures_check"';
    END IF;
    IF (r.refund_due_at IS NULL OR r.duplicate_of IS NOT NULL) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charges', CONSTRAINT = 'charges_refund_due_check',
            MESSAGE = 'new row for relation "charges" violates check constraint "charges_refund_due_check"';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION charge_events_rules(r charge_events) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF (r.type IN ('charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid',
            'checkout_session.expired', 'refund.succeeded', 'refund.failed', 'charge.late_refunded',
            'charge.duplicate_refunded', 'merchant.card_testing_suspected', 'charge.authorized', 'charge.captured',
            'charge.voided', 'charge.authorization_expiring', 'charge.authorization_expired', 'charge.late_voided')) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_events', CONSTRAINT = 'charge_events_type_check',
            MESSAGE = 'new row for relation "charge_events" violates check constraint "charge_events_type_check"';
    END IF;
    IF (CASE
            WHEN r.type LIKE 'merchant.%' OR r.type LIKE 'charge.authorization\_%' THEN r.attempt_id IS NULL AND r.checkout_session_id IS NULL
            WHEN r.type LIKE 'checkout\_session.%' THEN r.attempt_id IS NULL AND r.checkout_session_id IS NOT NULL
            ELSE r.attempt_id IS NOT NULL
        END) IS FALSE THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_events', CONSTRAINT = 'charge_events_subject_check',
            MESSAGE = 'new row for relation "charge_events" violates check constraint "charge_events_subject_check"';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

ALTER TABLE charge_attempts
    DROP CONSTRAINT charge_attempts_amount_check,
    DROP CONSTRAINT charge_attempts_idempotency_key_check,
    DROP CONSTRAINT charge_attempts_status_check,
    DROP CONSTRAINT charge_attempts_kind_check,
    DROP CONSTRAINT charge_attempts_check1,
    DROP CONSTRAINT charge_attempts_check2,
    DROP CONSTRAINT charge_attempts_action_check,
    DROP CONSTRAINT charge_attempts_late_check,
    DROP CONSTRAINT charge_attempts_key_session_check,
    DROP CONSTRAINT charge_attempts_capture_method_check,
    DROP CONSTRAINT charge_attempts_outcome_check,
    ADD CONSTRAINT charge_attempts_rules CHECK (charge_attempts_rules(charge_attempts.*));
ALTER TABLE charges
    DROP CONSTRAINT charges_amount_check,
    DROP CONSTRAINT charges_currency_check,
    DROP CONSTRAINT charges_capture_method_check,
    DROP CONSTRAINT charges_refunds_check,
    DROP CONSTRAINT charges_captures_check,
    DROP CONSTRAINT charges_refund_due_check,
    ADD CONSTRAINT charges_rules CHECK (charges_rules(charges.*));
ALTER TABLE charge_events
    DROP CONSTRAINT charge_events_type_check,
    DROP CONSTRAINT charge_events_subject_check,
    ADD CONSTRAINT charge_events_rules CHECK (charge_events_rules(charge_events.*));

-- +goose Down
ALTER TABLE charge_events DROP CONSTRAINT charge_events_rules;
ALTER TABLE charges DROP CONSTRAINT charges_rules;
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_rules;
DROP FUNCTION charge_events_rules(charge_events);
DROP FUNCTION charges_rules(charges);
DROP FUNCTION charge_attempts_rules(charge_attempts);
ALTER TABLE charges
    ADD CONSTRAINT charges_amount_check CHECK ((amount > 0)),
    ADD CONSTRAINT charges_capture_method_check CHECK ((capture_method = ANY (ARRAY['automatic'::text, 'manual'::text]))),
    ADD CONSTRAINT charges_captures_check CHECK (((0 <= amount_captured) AND (amount_captured <= capture_reserved) AND (capture_reserved <= amount) AND (NOT (void_claimed AND (capture_reserved > 0))) AND ((capture_method = 'manual'::text) OR ((capture_reserved = 0) AND (NOT void_claimed))))),
    ADD CONSTRAINT charges_currency_check CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    ADD CONSTRAINT charges_refund_due_check CHECK (((refund_due_at IS NULL) OR (duplicate_of IS NOT NULL))),
    ADD CONSTRAINT charges_refunds_check CHECK (((0 <= amount_refunded) AND (amount_refunded <= amount_reserved) AND (amount_reserved <= CASE capture_method     WHEN 'manual'::text THEN amount_captured     ELSE amount END)));
ALTER TABLE charge_events
    ADD CONSTRAINT charge_events_subject_check CHECK ( CASE     WHEN ((type ~~ 'merchant.%'::text) OR (type ~~ 'charge.authorization\_%'::text)) THEN ((attempt_id IS NULL) AND (checkout_session_id IS NULL))     WHEN (type ~~ 'checkout\_session.%'::text) THEN ((attempt_id IS NULL) AND (checkout_session_id IS NOT NULL))     ELSE (attempt_id IS NOT NULL) END),
    ADD CONSTRAINT charge_events_type_check CHECK ((type = ANY (ARRAY['charge.succeeded'::text, 'charge.failed'::text, 'charge.requires_action'::text, 'checkout_session.paid'::text, 'checkout_session.expired'::text, 'refund.succeeded'::text, 'refund.failed'::text, 'charge.late_refunded'::text, 'charge.duplicate_refunded'::text, 'merchant.card_testing_suspected'::text, 'charge.authorized'::text, 'charge.captured'::text, 'charge.voided'::text, 'charge.authorization_expiring'::text, 'charge.authorization_expired'::text, 'charge.late_voided'::text])));
ALTER TABLE charge_attempts
    ADD CONSTRAINT charge_attempts_action_check CHECK ((((next_action_url IS NULL) = (action_since IS NULL)) AND ((action_since IS NULL) = (action_checked_at IS NULL)) AND ((next_action_url IS NULL) OR (return_url IS NOT NULL)))),
    ADD CONSTRAINT charge_attempts_amount_check CHECK ((amount > 0)),
    ADD CONSTRAINT charge_attempts_capture_method_check CHECK ((capture_method = 'manual'::text)),
    ADD CONSTRAINT charge_attempts_check1 CHECK (((status = 'FAILED'::text) = (failure_code IS NOT NULL))),
    ADD CONSTRAINT charge_attempts_check2 CHECK (((status = 'PROCESSING'::text) = (completed_at IS NULL))),
    ADD CONSTRAINT charge_attempts_idempotency_key_check CHECK (((length(idempotency_key) >= 1) AND (length(idempotency_key) <= 255))),
    ADD CONSTRAINT charge_attempts_key_session_check CHECK (((key_session_id IS NULL) OR (key_session_id = checkout_session_id))),
    ADD CONSTRAINT charge_attempts_kind_check CHECK ((kind = ANY (ARRAY['charge'::text, 'refund'::text, 'capture'::text, 'void'::text]))),
    ADD CONSTRAINT charge_attempts_late_check CHECK ((((late_check_at IS NULL) OR (late_watch_until IS NOT NULL)) AND ((late_watch_until IS NULL) OR ((status = 'FAILED'::text) AND (kind = 'charge'::text))))),
    ADD CONSTRAINT charge_attempts_outcome_check CHECK ( CASE kind     WHEN 'charge'::text THEN (((status = 'SUCCEEDED'::text) = (charge_id IS NOT NULL)) AND (payment_method IS NOT NULL) AND (refund_id IS NULL) AND (pending_since IS NULL) AND (capture_id IS NULL))     WHEN 'refund'::text THEN ((charge_id IS NOT NULL) AND ((status = 'SUCCEEDED'::text) = (refund_id IS NOT NULL)) AND (payment_method IS NULL) AND (order_id IS NULL) AND (checkout_session_id IS NULL) AND (return_url IS NULL) AND (next_action_url IS NULL) AND (capture_id IS NULL))     WHEN 'capture'::text THEN ((charge_id IS NOT NULL) AND (capture_final IS NOT NULL) AND ((status = 'SUCCEEDED'::text) = (capture_id IS NOT NULL)) AND (refund_id IS NULL) AND (payment_method IS NULL) AND (checkout_session_id IS NULL) AND (next_action_url IS NULL))     WHEN 'void'::text THEN ((charge_id IS NOT NULL) AND (capture_id IS NULL) AND (refund_id IS NULL) AND (payment_method IS NULL) AND (checkout_session_id IS NULL) AND (next_action_url IS NULL))     ELSE NULL::boolean END),
    ADD CONSTRAINT charge_attempts_status_check CHECK ((status = ANY (ARRAY['PROCESSING'::text, 'SUCCEEDED'::text, 'FAILED'::text])));
