-- +goose Up
-- Authorize now, capture later. A charge made with capture_method 'manual'
-- only authorizes: its captures take up to its amount, in parts or whole,
-- until a final one releases the rest, a void cancels it, or the
-- authorization expires. What captures may take is reserved in the claim
-- of each capture (capture_reserved), and a void is claimed on the charge
-- (void_claimed), each by one conditional update on the locked charge,
-- with the CHECK below behind them: so no concurrency captures more than
-- was authorized, and a capture and a void of one charge never both pass.
ALTER TABLE charges ADD COLUMN capture_method text NOT NULL DEFAULT 'automatic'
    CONSTRAINT charges_capture_method_check CHECK (capture_method IN ('automatic', 'manual'));
ALTER TABLE charges ADD COLUMN amount_captured bigint NOT NULL DEFAULT 0;
ALTER TABLE charges ADD COLUMN capture_reserved bigint NOT NULL DEFAULT 0;
ALTER TABLE charges ADD COLUMN final_capture_claimed boolean NOT NULL DEFAULT false;
ALTER TABLE charges ADD COLUMN void_claimed boolean NOT NULL DEFAULT false;
ALTER TABLE charges ADD COLUMN voided_at timestamptz;
ALTER TABLE charges ADD COLUMN authorization_expires_at timestamptz;
ALTER TABLE charges ADD COLUMN authorization_expired_at timestamptz;
ALTER TABLE charges ADD COLUMN expiry_warned_at timestamptz;
ALTER TABLE charges ADD CONSTRAINT charges_captures_check CHECK (
    0 <= amount_captured AND amount_captured <= capture_reserved AND capture_reserved <= amount
    AND NOT (void_claimed AND capture_reserved > 0)
    AND (capture_method = 'manual' OR (capture_reserved = 0 AND NOT void_claimed)));
-- Refunds apply to what was captured: all of an automatic charge, what the
-- captures took of a manual one.
ALTER TABLE charges DROP CONSTRAINT charges_refunds_check;
ALTER TABLE charges ADD CONSTRAINT charges_refunds_check
    CHECK (0 <= amount_refunded AND amount_refunded <= amount_reserved
           AND amount_reserved <= CASE capture_method WHEN 'manual' THEN amount_captured ELSE amount END);
-- The authorizations still open, oldest expiry first, for the watch.
CREATE INDEX charges_open_authorizations_idx ON charges (authorization_expires_at)
    WHERE capture_method = 'manual' AND voided_at IS NULL AND authorization_expired_at IS NULL;

CREATE TABLE captures (
    id                  uuid PRIMARY KEY,
    merchant_id         uuid NOT NULL REFERENCES merchants (id),
    charge_id           uuid NOT NULL REFERENCES charges (id),
    amount              bigint NOT NULL CHECK (amount > 0),
    currency            text NOT NULL,
    final               boolean NOT NULL,
    provider_capture_id text NOT NULL CONSTRAINT captures_provider_capture_id_unique UNIQUE,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX captures_charge_idx ON captures (charge_id, created_at);

-- A capture attempt names its charge (charge_id), its amount and whether
-- it is final; once SUCCEEDED, its capture. A void attempt names its
-- charge.
ALTER TABLE charge_attempts ADD COLUMN capture_final boolean;
ALTER TABLE charge_attempts ADD COLUMN capture_id uuid REFERENCES captures (id);
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_kind_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_kind_check
    CHECK (kind IN ('charge', 'refund', 'capture', 'void'));
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_outcome_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_outcome_check CHECK (CASE kind
    WHEN 'charge' THEN (status = 'SUCCEEDED') = (charge_id IS NOT NULL)
        AND payment_method IS NOT NULL AND refund_id IS NULL AND pending_since IS NULL AND capture_id IS NULL
    WHEN 'refund' THEN charge_id IS NOT NULL AND (status = 'SUCCEEDED') = (refund_id IS NOT NULL)
        AND payment_method IS NULL AND order_id IS NULL AND checkout_session_id IS NULL
        AND return_url IS NULL AND next_action_url IS NULL AND capture_id IS NULL
    WHEN 'capture' THEN charge_id IS NOT NULL AND capture_final IS NOT NULL
        AND (status = 'SUCCEEDED') = (capture_id IS NOT NULL) AND refund_id IS NULL
        AND payment_method IS NULL AND checkout_session_id IS NULL AND next_action_url IS NULL
    WHEN 'void' THEN charge_id IS NOT NULL AND capture_id IS NULL AND refund_id IS NULL
        AND payment_method IS NULL AND checkout_session_id IS NULL AND next_action_url IS NULL
    END);

ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired',
    'refund.succeeded', 'refund.failed', 'charge.late_refunded', 'charge.duplicate_refunded',
    'merchant.card_testing_suspected', 'charge.authorized', 'charge.captured', 'charge.voided',
    'charge.authorization_expiring', 'charge.authorization_expired', 'charge.late_voided'));
-- An authorization's expiry is the charge's, not an attempt's: its events
-- name the charge (in their body) and no attempt.
ALTER TABLE charge_events DROP CONSTRAINT charge_events_subject_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_subject_check CHECK (CASE
    WHEN type LIKE 'merchant.%' OR type LIKE 'charge.authorization\_%' THEN attempt_id IS NULL AND checkout_session_id IS NULL
    WHEN type LIKE 'checkout\_session.%' THEN attempt_id IS NULL AND checkout_session_id IS NOT NULL
    ELSE attempt_id IS NOT NULL
END);

-- A charge attempt (and a checkout session, for the charge that pays it)
-- says how its charge is captured: NULL is automatic.
ALTER TABLE charge_attempts ADD COLUMN capture_method text
    CONSTRAINT charge_attempts_capture_method_check CHECK (capture_method = 'manual');
ALTER TABLE checkout_sessions ADD COLUMN capture_method text
    CONSTRAINT checkout_sessions_capture_method_check CHECK (capture_method = 'manual');

-- +goose Down
ALTER TABLE checkout_sessions DROP COLUMN capture_method;
ALTER TABLE charge_attempts DROP COLUMN capture_method;
DELETE FROM charge_events WHERE type IN ('charge.authorized', 'charge.captured', 'charge.voided',
    'charge.authorization_expiring', 'charge.authorization_expired', 'charge.late_voided');
ALTER TABLE charge_events DROP CONSTRAINT charge_events_subject_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_subject_check CHECK (CASE
    WHEN type LIKE 'merchant.%' THEN attempt_id IS NULL AND checkout_session_id IS NULL
    WHEN type LIKE 'checkout\_session.%' THEN attempt_id IS NULL AND checkout_session_id IS NOT NULL
    ELSE attempt_id IS NOT NULL
END);
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired',
    'refund.succeeded', 'refund.failed', 'charge.late_refunded', 'charge.duplicate_refunded',
    'merchant.card_testing_suspected'));
DELETE FROM charge_attempts WHERE kind IN ('capture', 'void');
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_outcome_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_outcome_check CHECK (CASE kind
    WHEN 'charge' THEN (status = 'SUCCEEDED') = (charge_id IS NOT NULL)
        AND payment_method IS NOT NULL AND refund_id IS NULL AND pending_since IS NULL
    WHEN 'refund' THEN charge_id IS NOT NULL AND (status = 'SUCCEEDED') = (refund_id IS NOT NULL)
        AND payment_method IS NULL AND order_id IS NULL AND checkout_session_id IS NULL
        AND return_url IS NULL AND next_action_url IS NULL
    END);
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_kind_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_kind_check CHECK (kind IN ('charge', 'refund'));
ALTER TABLE charge_attempts DROP COLUMN capture_id;
ALTER TABLE charge_attempts DROP COLUMN capture_final;
DROP TABLE captures;
ALTER TABLE charges DROP CONSTRAINT charges_refunds_check;
ALTER TABLE charges ADD CONSTRAINT charges_refunds_check
    CHECK (0 <= amount_refunded AND amount_refunded <= amount_reserved AND amount_reserved <= amount);
ALTER TABLE charges DROP CONSTRAINT charges_captures_check;
ALTER TABLE charges DROP COLUMN expiry_warned_at, DROP COLUMN authorization_expired_at, DROP COLUMN authorization_expires_at,
    DROP COLUMN voided_at, DROP COLUMN void_claimed, DROP COLUMN final_capture_claimed, DROP COLUMN capture_reserved,
    DROP COLUMN amount_captured, DROP COLUMN capture_method;
