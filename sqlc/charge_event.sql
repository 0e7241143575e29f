-- name: InsertChargeEvent :exec
-- The outbox write. Runs in the transaction that finalizes the attempt, after
-- the fenced update succeeded, so an event exists exactly when the change
-- committed (RecordChargeSucceeded writes a charge.succeeded with its
-- update, in the same statement). Its id goes on the relay's queue
-- (charge_events_unsent) in the same statement. Nothing notifies at commit:
-- the writer tells its own instance's relay once it has (events.Notifier).
-- A session's event has no attempt_id and names its checkout_session_id.
-- The writer's trace context (traceparent, tracestate) goes with it.
WITH event AS (
    INSERT INTO charge_events (id, type, merchant_id, idempotency_key, attempt_id, checkout_session_id, body, occurred_at,
                               traceparent, tracestate)
    VALUES (@id, @type, @merchant_id, @idempotency_key, sqlc.narg(attempt_id), sqlc.narg(checkout_session_id), @body, @occurred_at,
            nullif(sqlc.arg(traceparent)::text, ''), nullif(sqlc.arg(tracestate)::text, ''))
    RETURNING id
)
INSERT INTO charge_events_unsent (event_id) SELECT id FROM event;

-- name: RestoreChargeEventsQueue :execrows
-- The relay's first statement in its turn: when the queue is not whole
-- (charge_events_unsent_intact has no row: a crash's recovery or a
-- standby's promotion emptied both unlogged tables), every event the
-- broker has not taken goes back on it, read from charge_events (a
-- sequential scan, once after such an event), and the row is put back.
-- Counts the events queued again; 0, and no scan of charge_events, while
-- the queue is whole.
WITH lost AS (
    SELECT NOT EXISTS (SELECT 1 FROM charge_events_unsent_intact) AS lost
),
intact AS (
    INSERT INTO charge_events_unsent_intact SELECT true FROM lost WHERE lost.lost
    ON CONFLICT DO NOTHING
)
INSERT INTO charge_events_unsent (event_id)
SELECT id FROM charge_events WHERE (SELECT lost.lost FROM lost) AND sent_at IS NULL
ON CONFLICT DO NOTHING;

-- name: UnsentChargeEvents :many
-- The relay's batch: the oldest unsent events (the queue in id order, and
-- ids are time-ordered). No row is locked: the relays take turns, each
-- batch in a transaction that holds the relays' advisory lock (events'
-- relayTx), so no other relay reads the queue until this one has marked
-- what it sent; a lock on each row wrote a WAL record per event. The
-- events are read by their ids (= ANY of the batch): a join would be free
-- to merge with the whole of charge_events' primary key from its first
-- entry, on every batch. The body is the published one: the row's columns
-- put back into what its body holds, with what its charge's row holds
-- (charge_event_body(e, c), which the planner inlines: no executor of its
-- own for each event).
SELECT e.id, e.type, charge_event_body(e, c)::jsonb AS body, e.traceparent, e.tracestate
FROM charge_events e
LEFT JOIN charges c ON c.id = e.charge_id
WHERE e.id = ANY(ARRAY(
    SELECT event_id FROM charge_events_unsent
    ORDER BY event_id
    LIMIT sqlc.arg(max_events)::integer
))
ORDER BY e.id;

-- name: MarkChargeEventsSent :exec
-- Marks events that the broker acknowledged, in the relay's transaction:
-- off the queue, and sent_at on the event, which no index names, so the
-- update is HOT where the event's page has room. The events are found by
-- their ids (= ANY), as the relay's batch reads them, whatever the planner
-- guesses of the queue's rows; those the queue held are the ones marked.
-- (The history of a key reads sent_at as the event's publication.)
WITH sent AS (
    DELETE FROM charge_events_unsent WHERE event_id = ANY(sqlc.arg(ids)::uuid[])
    RETURNING event_id
)
UPDATE charge_events SET sent_at = sqlc.arg(now)::timestamptz
WHERE id = ANY(sqlc.arg(ids)::uuid[]) AND id IN (SELECT event_id FROM sent);

-- name: CountUnsentChargeEvents :one
-- For the outbox gauge: events not yet acknowledged by the broker.
SELECT count(*) FROM charge_events_unsent;

-- name: DeleteSentChargeEvents :execrows
-- Retention: forgets a small batch of events sent before the cutoff
-- (before), oldest first by id up to the cutoff's (before_id: ids are
-- time-ordered, and an event is sent after it was written), so the scan
-- reads the primary key over what retention forgets and no further.
DELETE FROM charge_events
WHERE id IN (
    SELECT id FROM charge_events
    WHERE id < sqlc.arg(before_id)::uuid AND sent_at < sqlc.arg(before)::timestamptz
    ORDER BY id
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
