-- +goose Up
-- A merchant is the tenant: idempotency keys, charges and API keys all belong to one.
CREATE TABLE merchants (
    id         uuid PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- API keys are stored as SHA-256 hashes: the keys are long random strings, so a
-- fast hash is enough, and a stolen table reveals no usable key.
CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    merchant_id uuid NOT NULL REFERENCES merchants (id) ON DELETE CASCADE,
    key_hash    bytea NOT NULL UNIQUE,
    -- The first characters of the key, so an operator can tell keys apart.
    key_prefix  text NOT NULL,
    -- Keys seeded for development (the demo key) are refused in production.
    development_only boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_merchant_id_idx ON api_keys (merchant_id);

-- +goose Down
DROP TABLE api_keys;
DROP TABLE merchants;
