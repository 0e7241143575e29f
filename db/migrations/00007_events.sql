-- +goose Up
-- The outbox: one row per finalized attempt, inserted in the same transaction
-- as the status change, so an event exists exactly when the change committed.
-- The relay publishes unsent rows to NATS JetStream (event id as Nats-Msg-Id)
-- and marks them sent; sent rows are deleted after KEY_RETENTION.
CREATE TABLE charge_events (
    id              uuid PRIMARY KEY,
    type            text NOT NULL CHECK (type IN ('charge.succeeded', 'charge.failed')),
    merchant_id     uuid NOT NULL REFERENCES merchants (id),
    idempotency_key text NOT NULL,
    -- No foreign key: the attempt may be forgotten (retention) before its
    -- event is; the event is the record of what happened.
    attempt_id      uuid NOT NULL,
    -- The event as published, byte for byte on every send.
    body            jsonb NOT NULL,
    occurred_at     timestamptz NOT NULL,
    sent_at         timestamptz
);
-- One event per attempt: a second finalization cannot happen (the fenced
-- update), and this makes that a constraint rather than an argument.
CREATE UNIQUE INDEX charge_events_attempt_idx ON charge_events (attempt_id);
-- The relay's way in: unsent events, oldest first.
CREATE INDEX charge_events_unsent_idx ON charge_events (occurred_at) WHERE sent_at IS NULL;
-- Retention's way in: sent events by when they were sent.
CREATE INDEX charge_events_sent_idx ON charge_events (sent_at) WHERE sent_at IS NOT NULL;

-- Wakes the relay and live status watchers when an event commits (NOTIFY is
-- delivered at commit, and not at all on rollback). The payload names the
-- attempt, not the event's content: listeners read what they need.
-- +goose StatementBegin
CREATE FUNCTION charge_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('chargeonce_events', json_build_object(
        'id', NEW.id, 'merchantId', NEW.merchant_id, 'idempotencyKey', NEW.idempotency_key)::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER charge_events_notify AFTER INSERT ON charge_events
    FOR EACH ROW EXECUTE FUNCTION charge_events_notify();

-- The receipts consumer's effect: one receipt per successful charge. The
-- primary key is the event id, so a redelivered event inserts nothing.
CREATE TABLE receipts (
    event_id           uuid PRIMARY KEY,
    merchant_id        uuid NOT NULL REFERENCES merchants (id),
    charge_id          uuid NOT NULL,
    idempotency_key    text NOT NULL,
    amount             bigint NOT NULL CHECK (amount > 0),
    currency           text NOT NULL,
    order_id           text,
    provider_charge_id text NOT NULL,
    charged_at         timestamptz NOT NULL,
    issued_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX receipts_merchant_idx ON receipts (merchant_id, issued_at);

-- +goose Down
DROP TABLE receipts;
DROP TRIGGER charge_events_notify ON charge_events;
DROP FUNCTION charge_events_notify();
DROP TABLE charge_events;
