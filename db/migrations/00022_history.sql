-- +goose Up
-- The history of a key: an append-only record of what happened under each
-- attempt's key (the requests that reached it, the provider calls, the
-- changes of holder, the shopper's wait, the event and its delivery), so
-- that "was I charged twice?" is answered by the API and `charges show`.
-- The rows the ledger's own writes make (the claim, a takeover, a release,
-- the finalizing write, the relay's and the webhook worker's marks) ride in
-- the statements and transactions that make them; the others (replays,
-- PROCESSING answers, refusals, provider calls that end in no write) are
-- batched by each instance's recorder. Replays and PROCESSING answers are
-- counted, not listed: one row per key and type, with count and last_at.
-- The table is read only by key (the index below), and kept while the
-- key's attempt is, KEY_RETENTION at least (the cleaner's pass). No primary
-- key: nothing refers to a row, and one index less is one write less on the
-- path of every charge; id orders rows of the same instant.
CREATE TABLE attempt_history (
    id              bigint GENERATED ALWAYS AS IDENTITY,
    merchant_id     uuid NOT NULL,
    kind            text NOT NULL,
    idempotency_key text NOT NULL,
    -- The attempt, NULL for a request refused before any attempt existed.
    attempt_id      uuid,
    at              timestamptz NOT NULL,
    type            text NOT NULL,
    -- The request that caused it (X-Request-Id) and its W3C trace; NULL
    -- for a background pass with no trace.
    request_id      text,
    trace_id        text,
    span_id         text,
    -- The chargeonce instance that wrote it.
    instance        text,
    detail          text,
    -- The attempt's status after it (PROCESSING, SUCCEEDED, FAILED).
    status          text,
    count           integer NOT NULL DEFAULT 1,
    last_at         timestamptz
);
CREATE INDEX attempt_history_key_idx ON attempt_history (merchant_id, idempotency_key, kind, at);
-- One counted row per key for its replays and for its PROCESSING answers.
CREATE UNIQUE INDEX attempt_history_counted_idx ON attempt_history (merchant_id, kind, idempotency_key, type)
    WHERE type IN ('request.replayed', 'request.processing');
-- The retention pass scans by age; a block range index costs next to
-- nothing to keep on an append-only table.
CREATE INDEX attempt_history_at_idx ON attempt_history USING brin (at);

-- +goose Down
DROP TABLE attempt_history;
