-- name: InsertChargeEvent :exec
-- The outbox write. Runs in the transaction that finalizes the attempt, after
-- the fenced update succeeded, so an event exists exactly when the change
-- committed (RecordChargeSucceeded writes a charge.succeeded with its
-- update, in the same statement). Nothing notifies at commit: the writer
-- tells its own instance's relay once it has (events.Notifier).
-- A session's event has no attempt_id and names its checkout_session_id.
-- The writer's trace context (traceparent, tracestate) goes with it.
INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, checkout_session_id, body, occurred_at,
                           traceparent, tracestate)
VALUES (@id, @type, @merchant_id, @idempotency_key, sqlc.narg(attempt_id), sqlc.narg(checkout_session_id), @body, @occurred_at,
        nullif(sqlc.arg(traceparent)::text, ''), nullif(sqlc.arg(tracestate)::text, ''));

-- name: LockUnsentChargeEvents :many
-- The relay's batch: the oldest unsent events, locked until the relay's
-- transaction ends. SKIP LOCKED lets several relays work side by side, each
-- on its own rows.
SELECT id, type, body, traceparent, tracestate FROM charge_events
WHERE sent_at IS NULL
ORDER BY occurred_at
LIMIT sqlc.arg(max_events)::integer
FOR UPDATE SKIP LOCKED;

-- name: MarkChargeEventsSent :exec
-- Marks events that the broker acknowledged, in the relay's transaction.
-- (The history of a key reads sent_at as the event's publication.)
UPDATE charge_events SET sent_at = sqlc.arg(now)::timestamptz
WHERE id = ANY(sqlc.arg(ids)::uuid[]);

-- name: CountUnsentChargeEvents :one
-- For the outbox gauge: events not yet acknowledged by the broker.
SELECT count(*) FROM charge_events WHERE sent_at IS NULL;

-- name: DeleteSentChargeEvents :execrows
-- Retention: forgets a small batch of events sent before the cutoff.
DELETE FROM charge_events
WHERE id IN (
    SELECT id FROM charge_events
    WHERE sent_at < sqlc.arg(before)::timestamptz
    ORDER BY sent_at
    LIMIT sqlc.arg(max_events)::integer
    FOR UPDATE SKIP LOCKED
);

-- name: InsertReceipt :execrows
-- The receipts consumer's effect. Keyed by the event id: a redelivered event
-- inserts nothing (0 rows), and the consumer treats that as done.
INSERT INTO receipts (event_id, merchant_id, charge_id, idempotency_key, amount, currency,
                      order_id, provider_charge_id, charged_at)
VALUES (@event_id, @merchant_id, @charge_id, @idempotency_key, @amount, @currency,
        sqlc.narg(order_id), @provider_charge_id, @charged_at)
ON CONFLICT (event_id) DO NOTHING;
