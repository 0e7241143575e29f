-- +goose Up
-- The answers that replays of settled charges were given, kept for the
-- next replay of the same request on any instance: an instance whose
-- memory does not hold a request's answer (after a restart, a failover, or
-- on another instance than the one that answered) reads it here in one
-- statement instead of reading the attempt and rendering it again. One row
-- per merchant and request: request_hash is a SHA-256 of the merchant, the
-- Idempotency-Key header and the body. The attempt's key, kind and expiry
-- count the replay in the key's history and stop it at the key's expiry.
-- A cache: written after the answer, in batches; a row that was not
-- written costs only a rendering. The retention forgets a row with its
-- attempt (stored_answers_attempt_idx).
CREATE TABLE stored_answers (
    merchant_id uuid NOT NULL,
    request_hash bytea NOT NULL,
    attempt_id uuid NOT NULL,
    kind text NOT NULL,
    idempotency_key text NOT NULL,
    expires_at timestamptz NOT NULL,
    operation text NOT NULL,
    answer bytea NOT NULL,
    CONSTRAINT stored_answers_pkey PRIMARY KEY (merchant_id, request_hash)
);
CREATE INDEX stored_answers_attempt_idx ON stored_answers (attempt_id);

-- +goose Down
DROP TABLE stored_answers;
