-- name: UpsertWebhookEndpoint :one
-- `webhook set`: registers the merchant's endpoint, or replaces the URL and
-- the secret of the one it has. The endpoint keeps its id, so deliveries
-- still pending go to the new URL with the new secret.
INSERT INTO webhook_endpoints (id, merchant_id, url, secret, created_at, updated_at)
VALUES (@id, @merchant_id, @url, @secret, sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz)
ON CONFLICT ON CONSTRAINT webhook_endpoints_merchant_unique
DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret, updated_at = EXCLUDED.updated_at
RETURNING id, merchant_id, url, created_at, updated_at;

-- name: ListWebhookEndpoints :many
-- `webhook list`: every endpoint with its merchant's name. Never the secret.
SELECT e.id, e.merchant_id, m.name AS merchant_name, e.url, e.created_at, e.updated_at
FROM webhook_endpoints e
JOIN merchants m ON m.id = e.merchant_id
ORDER BY m.name;

-- name: GetWebhookEndpointOfMerchant :one
-- The endpoint of a merchant, for `webhook deliveries` to tell a merchant
-- without one from one without deliveries. Never the secret.
SELECT e.id, e.merchant_id, m.name AS merchant_name, e.url, e.created_at, e.updated_at
FROM webhook_endpoints e
JOIN merchants m ON m.id = e.merchant_id
WHERE e.merchant_id = @merchant_id;

-- name: DeleteWebhookEndpoint :one
-- `webhook remove`: forgets the endpoint, and with it (cascade) its
-- deliveries and their attempts; says how many deliveries were still pending.
DELETE FROM webhook_endpoints e
WHERE e.merchant_id = @merchant_id
RETURNING e.id, e.url,
    (SELECT count(*) FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending') AS pending;

-- name: InsertWebhookDelivery :execrows
-- The consumer's effect: queues the event for the merchant's endpoint, if it
-- has one, in this one statement. Keyed by (event, endpoint), so a
-- redelivered message inserts nothing; 0 rows means no endpoint, or queued
-- already, and either way the message is done.
INSERT INTO webhook_deliveries (event_id, endpoint_id, event_type, body, created_at, next_attempt_at, traceparent, tracestate)
SELECT @event_id, e.id, @event_type, @body, sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz,
       nullif(sqlc.arg(traceparent)::text, ''), nullif(sqlc.arg(tracestate)::text, '')
FROM webhook_endpoints e
WHERE e.merchant_id = @merchant_id
ON CONFLICT ON CONSTRAINT webhook_deliveries_pkey DO NOTHING;

-- name: TakeDueWebhookDeliveries :many
-- The worker's batch: at most one due delivery per endpoint (its oldest), of
-- endpoints that have no delivery under a live lease anywhere and that this
-- worker is not already sending to, so one slow endpoint holds at most one
-- sender. Each is leased and its attempt number bumped. SKIP LOCKED lets
-- several instances take side by side; the lease condition is checked again
-- on the locked row, so a delivery another instance just took is skipped.
WITH due AS (
    SELECT DISTINCT ON (d.endpoint_id) d.event_id, d.endpoint_id, d.next_attempt_at
    FROM webhook_deliveries d
    WHERE d.state = 'pending'
      AND d.next_attempt_at <= sqlc.arg(now)::timestamptz
      AND NOT (d.endpoint_id = ANY(sqlc.arg(busy_endpoints)::uuid[]))
      AND NOT EXISTS (
          SELECT 1 FROM webhook_deliveries l
          WHERE l.endpoint_id = d.endpoint_id AND l.state = 'pending'
            AND l.locked_until > sqlc.arg(now)::timestamptz
      )
    ORDER BY d.endpoint_id, d.next_attempt_at, d.event_id
), taken AS (
    SELECT d.event_id, d.endpoint_id
    FROM webhook_deliveries d
    JOIN due ON due.event_id = d.event_id AND due.endpoint_id = d.endpoint_id
    WHERE d.state = 'pending'
      AND (d.locked_until IS NULL OR d.locked_until <= sqlc.arg(now)::timestamptz)
    ORDER BY due.next_attempt_at
    LIMIT sqlc.arg(max_deliveries)::integer
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE webhook_deliveries d
SET locked_until = sqlc.arg(lease_until)::timestamptz, attempts = d.attempts + 1
FROM taken, webhook_endpoints e
WHERE d.event_id = taken.event_id AND d.endpoint_id = taken.endpoint_id AND e.id = d.endpoint_id
RETURNING d.event_id, d.endpoint_id, d.event_type, d.body, d.attempts, d.created_at,
          e.merchant_id, e.url, e.secret, d.traceparent, d.tracestate;

-- name: InsertWebhookAttempt :exec
-- The attempt log: one row per attempt, written with the delivery's new
-- state in one transaction.
-- The attempt's history row (webhook.attempted) is written with it, for
-- the attempt the event is about: its status, never the endpoint's address
-- or the error's text, which may name it.
WITH logged AS (
    INSERT INTO webhook_attempts (event_id, endpoint_id, attempt, started_at, duration_us, http_status, error)
    VALUES (@event_id, @endpoint_id, @attempt, @started_at, @duration_us, sqlc.narg(http_status), sqlc.narg(error))
    ON CONFLICT ON CONSTRAINT webhook_attempts_pkey DO NOTHING
    RETURNING event_id, endpoint_id, attempt, started_at, duration_us, http_status
)
INSERT INTO attempt_history (attempt_id, at, trace_id, instance, entries)
SELECT (convert_from(d.body, 'UTF8')::jsonb ->> 'attemptId')::uuid, l.started_at,
       substring(d.traceparent from 4 for 32), nullif(sqlc.arg(instance)::text, ''),
       jsonb_build_array(jsonb_build_object('at', l.started_at, 'type', 'webhook.attempted', 'detail',
           d.event_type || ' to endpoint ' || l.endpoint_id || ', attempt ' || l.attempt || ': ' ||
           coalesce('HTTP ' || l.http_status, 'no HTTP answer') || ' in ' || (l.duration_us / 1000) || ' ms'))
FROM logged l
JOIN webhook_deliveries d ON d.event_id = l.event_id AND d.endpoint_id = l.endpoint_id
WHERE convert_from(d.body, 'UTF8')::jsonb ? 'attemptId';

-- name: FinishWebhookDelivery :execrows
-- Ends a delivery as delivered or failed (given up). Fenced on the attempt
-- number the worker was given: a worker whose lease ran out and whose
-- delivery was taken again writes nothing.
UPDATE webhook_deliveries
SET state = sqlc.arg(state)::text, completed_at = sqlc.arg(now)::timestamptz, locked_until = NULL
WHERE event_id = @event_id AND endpoint_id = @endpoint_id AND state = 'pending' AND attempts = @attempt;

-- name: RetryWebhookDelivery :execrows
-- Schedules the next attempt of a delivery whose attempt failed, and gives
-- the lease back. Fenced like FinishWebhookDelivery.
UPDATE webhook_deliveries
SET next_attempt_at = sqlc.arg(next_attempt_at)::timestamptz, locked_until = NULL
WHERE event_id = @event_id AND endpoint_id = @endpoint_id AND state = 'pending' AND attempts = @attempt;

-- name: ListWebhookDeliveryLog :many
-- `webhook deliveries`: an endpoint's attempts, newest first, with the state
-- of their delivery; a delivery not yet attempted shows as one row without
-- an attempt.
SELECT d.event_id, d.event_type, d.state, d.next_attempt_at, d.created_at,
       a.attempt, a.started_at, a.duration_us, a.http_status, a.error
FROM webhook_deliveries d
LEFT JOIN webhook_attempts a ON a.event_id = d.event_id AND a.endpoint_id = d.endpoint_id
WHERE d.endpoint_id = @endpoint_id
ORDER BY coalesce(a.started_at, d.created_at) DESC, d.event_id, a.attempt DESC
LIMIT sqlc.arg(max_rows)::integer;

-- name: CountPendingWebhookDeliveries :one
-- For the pending deliveries gauge.
SELECT count(*) FROM webhook_deliveries WHERE state = 'pending';

-- name: DeleteFinishedWebhookDeliveries :execrows
-- Retention: forgets a small batch of deliveries that finished before the
-- cutoff, and (cascade) their attempts.
DELETE FROM webhook_deliveries
WHERE (event_id, endpoint_id) IN (
    SELECT event_id, endpoint_id FROM webhook_deliveries
    WHERE state <> 'pending' AND completed_at < sqlc.arg(before)::timestamptz
    ORDER BY completed_at
    LIMIT sqlc.arg(max_deliveries)::integer
    FOR UPDATE SKIP LOCKED
);
