-- +goose Up
-- The simulated card provider keeps its own state in its own schema, as a real
-- provider would keep it in its own database. chargeonce's code never reads it
-- directly: it only talks to the simulator over HTTP.
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

-- +goose Down
DROP SCHEMA cardsim CASCADE;
