-- +goose Up
-- A charge is the business record of money that moved. It outlives the
-- idempotency key that created it.
CREATE TABLE charges (
    id                 uuid PRIMARY KEY,
    merchant_id        uuid NOT NULL REFERENCES merchants (id),
    amount             bigint NOT NULL CHECK (amount > 0),
    currency           text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    order_id           text,
    description        text,
    provider_charge_id text NOT NULL UNIQUE,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX charges_merchant_id_created_at_idx ON charges (merchant_id, created_at);

-- One row per (merchant, idempotency key): the claim. The unique index is what
-- makes the claim atomic; the row is inserted and committed before the card
-- provider is called.
CREATE TABLE charge_attempts (
    id               uuid PRIMARY KEY,
    merchant_id      uuid NOT NULL REFERENCES merchants (id),
    idempotency_key  text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    -- SHA-256 of the canonical request: the same key with another request is refused.
    fingerprint      bytea NOT NULL,
    status           text NOT NULL DEFAULT 'PROCESSING'
                     CHECK (status IN ('PROCESSING', 'SUCCEEDED', 'FAILED')),
    -- Our own idempotency key at the provider, derived from this row and kept
    -- so that every retry and every later reconciliation sends the same one.
    provider_key     text NOT NULL UNIQUE,
    amount           bigint NOT NULL CHECK (amount > 0),
    currency         text NOT NULL,
    payment_method   text NOT NULL,
    order_id         text,
    description      text,
    charge_id        uuid REFERENCES charges (id),
    failure_code     text,
    failure_message  text,
    -- Bumped by every takeover of the attempt; finalizing writes are fenced on it.
    attempt          integer NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    -- When the stored result may be forgotten.
    expires_at       timestamptz NOT NULL,
    CHECK ((status = 'SUCCEEDED') = (charge_id IS NOT NULL)),
    CHECK ((status = 'FAILED') = (failure_code IS NOT NULL)),
    CHECK ((status = 'PROCESSING') = (completed_at IS NULL))
);
CREATE UNIQUE INDEX charge_attempts_merchant_key_idx ON charge_attempts (merchant_id, idempotency_key);
-- Finds attempts that are still open, for the reconciler and operators.
CREATE INDEX charge_attempts_processing_idx ON charge_attempts (updated_at) WHERE status = 'PROCESSING';

-- +goose Down
DROP TABLE charge_attempts;
DROP TABLE charges;
