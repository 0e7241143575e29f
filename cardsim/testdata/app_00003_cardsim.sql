-- The Up section of chargeonce's migration 00003 as it was until the
-- simulator had migrations of its own: what a development database migrated
-- then holds. TestMigrate_DatabaseMigratedBefore_AdoptsSchemaAndCharges
-- builds such a database from it.
CREATE SCHEMA cardsim;

CREATE TABLE cardsim.charges (
    id               text PRIMARY KEY,
    -- The caller's idempotency key (chargeonce's provider key): one charge per key.
    idempotency_key  text NOT NULL UNIQUE,
    -- SHA-256 of the request parameters, to refuse a reused key with other parameters.
    request_hash     bytea NOT NULL,
    amount           bigint NOT NULL,
    currency         text NOT NULL,
    payment_method   text NOT NULL,
    description      text,
    status           text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    failure_code     text,
    failure_message  text,
    metadata         jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cardsim_charges_created_at_idx ON cardsim.charges (created_at);
