-- name: InsertHistory :exec
-- Appends history rows, one per element of the arrays: a transaction's
-- own rows (written with its other writes, before it commits), or a
-- recorder's batch. Empty strings and the nil uuid stand for NULL.
INSERT INTO attempt_history (merchant_id, kind, idempotency_key, attempt_id, at, type,
                             request_id, trace_id, span_id, instance, detail, status)
SELECT h.merchant_id, h.kind, h.idempotency_key, nullif(h.attempt_id, '00000000-0000-0000-0000-000000000000'::uuid),
       h.at, h.type, nullif(h.request_id, ''), nullif(h.trace_id, ''), nullif(h.span_id, ''),
       nullif(h.instance, ''), nullif(h.detail, ''), nullif(h.status, '')
FROM (SELECT unnest(sqlc.arg(merchant_id)::uuid[]) AS merchant_id,
            unnest(sqlc.arg(kind)::text[]) AS kind,
            unnest(sqlc.arg(idempotency_key)::text[]) AS idempotency_key,
            unnest(sqlc.arg(attempt_id)::uuid[]) AS attempt_id,
            unnest(sqlc.arg(at)::timestamptz[]) AS at,
            unnest(sqlc.arg(type)::text[]) AS type,
            unnest(sqlc.arg(request_id)::text[]) AS request_id,
            unnest(sqlc.arg(trace_id)::text[]) AS trace_id,
            unnest(sqlc.arg(span_id)::text[]) AS span_id,
            unnest(sqlc.arg(instance)::text[]) AS instance,
            unnest(sqlc.arg(detail)::text[]) AS detail,
            unnest(sqlc.arg(status)::text[]) AS status) AS h;

-- name: AddHistoryCounts :exec
-- Adds a recorder's counts of replays and PROCESSING answers to each key's
-- one counted row of their type: the first such request stays the row's
-- (at, its request and trace), the last one moves last_at.
INSERT INTO attempt_history (merchant_id, kind, idempotency_key, attempt_id, at, type,
                             request_id, trace_id, span_id, instance, count, last_at)
SELECT h.merchant_id, h.kind, h.idempotency_key, nullif(h.attempt_id, '00000000-0000-0000-0000-000000000000'::uuid),
       h.at, h.type, nullif(h.request_id, ''), nullif(h.trace_id, ''), nullif(h.span_id, ''),
       nullif(h.instance, ''), h.count, h.last_at
FROM (SELECT unnest(sqlc.arg(merchant_id)::uuid[]) AS merchant_id,
            unnest(sqlc.arg(kind)::text[]) AS kind,
            unnest(sqlc.arg(idempotency_key)::text[]) AS idempotency_key,
            unnest(sqlc.arg(attempt_id)::uuid[]) AS attempt_id,
            unnest(sqlc.arg(at)::timestamptz[]) AS at,
            unnest(sqlc.arg(type)::text[]) AS type,
            unnest(sqlc.arg(request_id)::text[]) AS request_id,
            unnest(sqlc.arg(trace_id)::text[]) AS trace_id,
            unnest(sqlc.arg(span_id)::text[]) AS span_id,
            unnest(sqlc.arg(instance)::text[]) AS instance,
            unnest(sqlc.arg(count)::integer[]) AS count,
            unnest(sqlc.arg(last_at)::timestamptz[]) AS last_at) AS h
ON CONFLICT (merchant_id, kind, idempotency_key, type) WHERE type IN ('request.replayed', 'request.processing')
DO UPDATE SET count = attempt_history.count + excluded.count,
              last_at = greatest(attempt_history.last_at, excluded.last_at),
              at = least(attempt_history.at, excluded.at);

-- name: ListHistory :many
-- The history of a merchant's key of one kind, oldest first: `chargeHistory`
-- and `charges show`. Every scope of the key (the merchant's own, and its
-- checkout pages'), as a support desk asks by the key alone.
SELECT at, type, request_id, trace_id, span_id, instance, detail, status, count, last_at, attempt_id
FROM attempt_history
WHERE merchant_id = @merchant_id AND idempotency_key = @idempotency_key AND kind = @kind
ORDER BY at, id
LIMIT sqlc.arg(max_rows)::integer;

-- name: ClaimSpan :one
-- The trace and span of the request that claimed an attempt, for a later
-- holder's link back to it.
SELECT trace_id, span_id FROM attempt_history
WHERE attempt_id = @attempt_id AND type = 'request.claimed'
  AND merchant_id = @merchant_id AND idempotency_key = @idempotency_key AND kind = @kind
LIMIT 1;

-- name: DeleteOldHistory :execrows
-- Retention: forgets a small batch of history rows older than cutoff whose
-- key has no attempt any more (its result was forgotten, or it never had
-- one), so that a key's history lives as long as its result, and
-- KEY_RETENTION at least.
DELETE FROM attempt_history
WHERE ctid = ANY (ARRAY(
    SELECT h.ctid FROM attempt_history h
    WHERE h.at < sqlc.arg(cutoff)::timestamptz
      AND NOT EXISTS (
          SELECT 1 FROM charge_attempts a
          WHERE a.merchant_id = h.merchant_id AND a.idempotency_key = h.idempotency_key AND a.kind = h.kind
      )
    LIMIT sqlc.arg(max_rows)::integer
));

-- name: ListHistoryMerchants :many
-- The merchants that have a history under a key of one kind, for `charges
-- show KEY`, which an operator runs by the key alone: one probe of the key
-- index per merchant.
SELECT m.id, m.name FROM merchants m
WHERE EXISTS (
    SELECT 1 FROM attempt_history h
    WHERE h.merchant_id = m.id AND h.idempotency_key = @idempotency_key AND h.kind = @kind
)
ORDER BY m.name;
