-- +goose Up
-- A merchant's webhook endpoint: where its charge events are POSTed, and the
-- secret that signs them. One per merchant; `webhook set` replaces the URL
-- and the secret in place, so deliveries still pending go to the new URL,
-- signed with the new secret.
CREATE TABLE webhook_endpoints (
    id          uuid PRIMARY KEY,
    merchant_id uuid NOT NULL REFERENCES merchants (id) ON DELETE CASCADE,
    url         text NOT NULL,
    -- A shared secret: the server needs it whole to sign, so it is stored as
    -- is (unlike API keys, which are only compared). Never logged, never listed.
    secret      text NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    -- `webhook set` upserts on this name.
    CONSTRAINT webhook_endpoints_merchant_unique UNIQUE (merchant_id)
);

-- One row per event and endpoint: what to send, and where its sending stands.
-- The consumer inserts it before acking the NATS message; a redelivered
-- message finds the key taken and inserts nothing.
CREATE TABLE webhook_deliveries (
    event_id        uuid NOT NULL,
    endpoint_id     uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_type      text NOT NULL,
    -- The event's JSON exactly as it came from the broker: the request body,
    -- byte for byte, on every attempt (bytea, since jsonb would reformat it).
    body            bytea NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    -- Attempts started so far; bumped when a worker takes the delivery, and
    -- the worker's result is written only while it still holds that number.
    attempts        integer NOT NULL DEFAULT 0,
    -- When the delivery was first queued: retries stop MaxAge after it.
    created_at      timestamptz NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    -- The lease of the worker sending it. A lease that ends without a result
    -- (the worker died) makes the delivery due again.
    locked_until    timestamptz,
    completed_at    timestamptz,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (event_id, endpoint_id),
    CHECK ((state = 'pending') = (completed_at IS NULL))
);
-- An endpoint's deliveries, newest last: `webhook deliveries`, and the
-- cascade when an endpoint is removed.
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at);
-- The worker's way in: pending deliveries of each endpoint, oldest due first.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE state = 'pending';
-- Retention's way in: finished deliveries by when they finished.
CREATE INDEX webhook_deliveries_completed_idx ON webhook_deliveries (completed_at) WHERE state <> 'pending';

-- Every attempt to send a delivery, for operators (`webhook deliveries`):
-- when, how long, and what came back. Never the secret nor the signature.
CREATE TABLE webhook_attempts (
    event_id    uuid NOT NULL,
    endpoint_id uuid NOT NULL,
    attempt     integer NOT NULL,
    started_at  timestamptz NOT NULL,
    duration_us bigint NOT NULL, -- microseconds
    -- The HTTP status when an answer came, else the error (truncated).
    http_status integer,
    error       text,
    CONSTRAINT webhook_attempts_pkey PRIMARY KEY (event_id, endpoint_id, attempt),
    -- Forgotten with its delivery (retention, or `webhook remove`). The
    -- worker tells an attempt whose endpoint was removed meanwhile by this name.
    CONSTRAINT webhook_attempts_delivery_fkey FOREIGN KEY (event_id, endpoint_id)
        REFERENCES webhook_deliveries (event_id, endpoint_id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
