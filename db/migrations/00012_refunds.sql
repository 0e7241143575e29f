-- +goose Up
-- Refunds: a second kind of attempt. A refund is claimed on the same
-- unique index as a charge, held under the same lease and fenced on the
-- same attempt number, settled by the same reconciler and forgotten by the
-- same retention; only what it does at the provider and what it records
-- differ. kind says which.
--
-- A charge's refundable money is reserved in the refund's claim, by one
-- conditional update of the charge (reserved + amount <= amount), and the
-- CHECK below holds whatever the code does: never more refunded than was
-- charged. A refund that fails gives its reservation back.
--   amount_reserved: refunds running or succeeded.
--   amount_refunded: refunds succeeded (and not failed since).
ALTER TABLE charges ADD COLUMN amount_reserved bigint NOT NULL DEFAULT 0;
ALTER TABLE charges ADD COLUMN amount_refunded bigint NOT NULL DEFAULT 0;
ALTER TABLE charges ADD CONSTRAINT charges_refunds_check
    CHECK (0 <= amount_refunded AND amount_refunded <= amount_reserved AND amount_reserved <= amount);

-- A refund is money that went back. Like a charge it outlives the attempt
-- that made it. A refund that succeeded may still fail later (the card was
-- closed): it is then FAILED, with when and why.
CREATE TABLE refunds (
    id                 uuid PRIMARY KEY,
    merchant_id        uuid NOT NULL REFERENCES merchants (id),
    charge_id          uuid NOT NULL REFERENCES charges (id),
    amount             bigint NOT NULL CHECK (amount > 0),
    currency           text NOT NULL,
    reason             text,
    provider_refund_id text NOT NULL CONSTRAINT refunds_provider_refund_id_unique UNIQUE,
    status             text NOT NULL DEFAULT 'SUCCEEDED' CHECK (status IN ('SUCCEEDED', 'FAILED')),
    failure_code       text,
    failure_message    text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    failed_at          timestamptz,
    CONSTRAINT refunds_failed_check CHECK ((status = 'FAILED') = (failed_at IS NOT NULL)
                                           AND (status = 'FAILED') = (failure_code IS NOT NULL))
);
CREATE INDEX refunds_charge_idx ON refunds (charge_id, created_at);

-- The attempt's kind. A refund attempt names the charge it refunds
-- (charge_id, from its claim on) and, once SUCCEEDED, its refund; it has no
-- card, order, session or return. pending_since: the provider accepted
-- the refund and has not made it final yet; from then on the refund is
-- only ever read, at the reconciler's looks (locked_until).
ALTER TABLE charge_attempts ADD COLUMN kind text NOT NULL DEFAULT 'charge'
    CONSTRAINT charge_attempts_kind_check CHECK (kind IN ('charge', 'refund'));
ALTER TABLE charge_attempts ADD COLUMN refund_id uuid REFERENCES refunds (id);
ALTER TABLE charge_attempts ADD COLUMN pending_since timestamptz;
ALTER TABLE charge_attempts ALTER COLUMN payment_method DROP NOT NULL;
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_outcome_check CHECK (CASE kind
    WHEN 'charge' THEN (status = 'SUCCEEDED') = (charge_id IS NOT NULL)
        AND payment_method IS NOT NULL AND refund_id IS NULL AND pending_since IS NULL
    WHEN 'refund' THEN charge_id IS NOT NULL AND (status = 'SUCCEEDED') = (refund_id IS NOT NULL)
        AND payment_method IS NULL AND order_id IS NULL AND checkout_session_id IS NULL
        AND return_url IS NULL AND next_action_url IS NULL
    END);

-- refund.succeeded and refund.failed: a refund attempt has at most one of
-- each (a refund that succeeded may fail later); a charge still has one
-- final event and one requires_action.
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired',
    'refund.succeeded', 'refund.failed'));
DROP INDEX charge_events_attempt_idx;
CREATE UNIQUE INDEX charge_events_attempt_idx ON charge_events (attempt_id)
    WHERE type IN ('charge.succeeded', 'charge.failed');
CREATE UNIQUE INDEX charge_events_refund_idx ON charge_events (attempt_id, type)
    WHERE type IN ('refund.succeeded', 'refund.failed');

-- +goose Down
DROP INDEX charge_events_refund_idx;
DROP INDEX charge_events_attempt_idx;
DELETE FROM charge_events WHERE type IN ('refund.succeeded', 'refund.failed');
CREATE UNIQUE INDEX charge_events_attempt_idx ON charge_events (attempt_id) WHERE type <> 'charge.requires_action';
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired'));
DELETE FROM charge_attempts WHERE kind = 'refund';
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_outcome_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_check CHECK ((status = 'SUCCEEDED') = (charge_id IS NOT NULL));
ALTER TABLE charge_attempts ALTER COLUMN payment_method SET NOT NULL;
ALTER TABLE charge_attempts DROP COLUMN pending_since;
ALTER TABLE charge_attempts DROP COLUMN refund_id;
ALTER TABLE charge_attempts DROP COLUMN kind;
DROP TABLE refunds;
ALTER TABLE charges DROP CONSTRAINT charges_refunds_check;
ALTER TABLE charges DROP COLUMN amount_refunded;
ALTER TABLE charges DROP COLUMN amount_reserved;
