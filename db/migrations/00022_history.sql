-- +goose Up
-- The history of a key: an append-only record of what happened under each
-- attempt's key (the requests that reached it, the provider calls, the
-- changes of holder, the shopper's wait, the event and its delivery), so
-- that "was I charged twice?" is answered by the API and `charges show`.
--
-- A row is one write's share of it: its entries (history.Entry as JSON:
-- at, type, detail, and status when final), and who wrote them (the
-- request, its trace, the instance). The rows the ledger's own writes imply
-- (the claim, a takeover, a release, the finalizing write, the relay's and
-- the webhook worker's marks) ride in the statements and transactions that
-- make them, one row each; the others (a mismatch, a refusal, a provider
-- call that ends in no write) come from each instance's batched recorder.
-- What is cheap is what a charge writes: one row with the claim, one with
-- the finalization, each one index entry on an attempt id that grows with
-- time (UUIDv7), so inserts touch the right-most page.
CREATE TABLE attempt_history (
    id              bigint GENERATED ALWAYS AS IDENTITY,
    -- The attempt; NULL only for a request refused before any claim, whose
    -- key is then named by the three columns after it (NULL otherwise: the
    -- attempt names them).
    attempt_id      uuid,
    merchant_id     uuid,
    kind            text,
    idempotency_key text,
    at              timestamptz NOT NULL,
    -- The request that wrote it (X-Request-Id) and its W3C trace; NULL for
    -- a background pass with no trace.
    request_id      text,
    trace_id        text,
    span_id         text,
    instance        text,
    entries         jsonb NOT NULL,
    CHECK ((attempt_id IS NULL) = (merchant_id IS NOT NULL))
);
-- No primary key: nothing refers to a row, and an index less is a write
-- less on the path of every charge; id orders rows of the same instant.
CREATE INDEX attempt_history_attempt_idx ON attempt_history (attempt_id);
CREATE INDEX attempt_history_refused_idx ON attempt_history (merchant_id, idempotency_key, kind)
    WHERE attempt_id IS NULL;
-- The retention pass of rows whose attempt is gone scans by age; a block
-- range index costs next to nothing to keep on an append-only table.
CREATE INDEX attempt_history_at_idx ON attempt_history USING brin (at);

-- Replays and PROCESSING answers are counted, not listed: one row per
-- attempt and type, which each instance's recorder adds its counts to now
-- and then (HISTORY_COUNT_INTERVAL), never once per request; the first
-- request's time, id and trace stay the row's. Room on each page keeps its
-- updates HOT.
CREATE TABLE attempt_counts (
    attempt_id uuid NOT NULL,
    type       text NOT NULL,
    count      integer NOT NULL,
    first_at   timestamptz NOT NULL,
    last_at    timestamptz NOT NULL,
    request_id text,
    trace_id   text,
    instance   text,
    CONSTRAINT attempt_counts_pkey PRIMARY KEY (attempt_id, type)
) WITH (fillfactor = 70);

-- +goose Down
DROP TABLE attempt_counts;
DROP TABLE attempt_history;
