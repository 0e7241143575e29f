-- +goose Up
-- The simulated card provider keeps its state in a schema of its own, as a
-- real provider keeps it in its own database, and chargeonce's code never
-- reads it: it talks to the simulator over HTTP only. These migrations are
-- the simulator's. cardsim.Migrate applies them, recording them in
-- cardsim_goose_db_version (apart from chargeonce's goose_db_version), only
-- where the simulator is mounted: a development server, tests, benchmarks.
-- A production database never gets this schema.
--
-- Until the simulator had migrations of its own, chargeonce's migration
-- 00003 created this same schema in every database. A development database
-- made then already holds it, with the charges that the demo and the
-- reconciler count on: IF NOT EXISTS adopts them as they are. The
-- constraints carry the names PostgreSQL gave them then, so that a database
-- made either way has the same names.
CREATE SCHEMA IF NOT EXISTS cardsim;

CREATE TABLE IF NOT EXISTS cardsim.charges (
    id               text NOT NULL,
    -- The caller's idempotency key (chargeonce's provider key): one charge per key.
    idempotency_key  text NOT NULL,
    -- SHA-256 of the request parameters, to refuse a reused key with other parameters.
    request_hash     bytea NOT NULL,
    amount           bigint NOT NULL,
    currency         text NOT NULL,
    payment_method   text NOT NULL,
    description      text,
    status           text NOT NULL,
    failure_code     text,
    failure_message  text,
    metadata         jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT charges_pkey PRIMARY KEY (id),
    -- The insert of a charge relies on it: ON CONFLICT (idempotency_key).
    CONSTRAINT charges_idempotency_key_key UNIQUE (idempotency_key),
    CONSTRAINT charges_status_check CHECK (status IN ('succeeded', 'failed'))
);
-- Lists charges newest first.
CREATE INDEX IF NOT EXISTS cardsim_charges_created_at_idx ON cardsim.charges (created_at);

-- +goose Down
DROP SCHEMA cardsim CASCADE;
