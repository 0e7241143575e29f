-- name: InsertHistory :exec
-- Appends history rows, one per element of the arrays: a transaction's
-- own (written with its other writes, before it commits), or a recorder's
-- batch. The nil uuid and empty strings stand for NULL; entries are each
-- row's JSON array.
INSERT INTO attempt_history (attempt_id, merchant_id, kind, idempotency_key, at,
                             request_id, trace_id, span_id, instance, entries)
SELECT nullif(h.attempt_id, '00000000-0000-0000-0000-000000000000'::uuid),
       CASE WHEN h.attempt_id = '00000000-0000-0000-0000-000000000000'::uuid THEN h.merchant_id END,
       CASE WHEN h.attempt_id = '00000000-0000-0000-0000-000000000000'::uuid THEN h.kind END,
       CASE WHEN h.attempt_id = '00000000-0000-0000-0000-000000000000'::uuid THEN h.idempotency_key END,
       h.at, nullif(h.request_id, ''), nullif(h.trace_id, ''), nullif(h.span_id, ''), nullif(h.instance, ''),
       h.entries::jsonb
FROM (SELECT unnest(sqlc.arg(attempt_id)::uuid[]) AS attempt_id,
             unnest(sqlc.arg(merchant_id)::uuid[]) AS merchant_id,
             unnest(sqlc.arg(kind)::text[]) AS kind,
             unnest(sqlc.arg(idempotency_key)::text[]) AS idempotency_key,
             unnest(sqlc.arg(at)::timestamptz[]) AS at,
             unnest(sqlc.arg(request_id)::text[]) AS request_id,
             unnest(sqlc.arg(trace_id)::text[]) AS trace_id,
             unnest(sqlc.arg(span_id)::text[]) AS span_id,
             unnest(sqlc.arg(instance)::text[]) AS instance,
             unnest(sqlc.arg(entries)::text[]) AS entries) AS h;

-- name: AddHistoryCounts :exec
-- Adds a recorder's counts of replays and PROCESSING answers to each
-- attempt's one row of their type: the first request stays the row's, the
-- last moves last_at.
INSERT INTO attempt_counts (attempt_id, type, count, first_at, last_at, request_id, trace_id, instance)
SELECT c.attempt_id, c.type, c.count, c.first_at, c.last_at,
       nullif(c.request_id, ''), nullif(c.trace_id, ''), nullif(c.instance, '')
FROM (SELECT unnest(sqlc.arg(attempt_id)::uuid[]) AS attempt_id,
             unnest(sqlc.arg(type)::text[]) AS type,
             unnest(sqlc.arg(count)::integer[]) AS count,
             unnest(sqlc.arg(first_at)::timestamptz[]) AS first_at,
             unnest(sqlc.arg(last_at)::timestamptz[]) AS last_at,
             unnest(sqlc.arg(request_id)::text[]) AS request_id,
             unnest(sqlc.arg(trace_id)::text[]) AS trace_id,
             unnest(sqlc.arg(instance)::text[]) AS instance) AS c
ON CONFLICT ON CONSTRAINT attempt_counts_pkey
DO UPDATE SET count = attempt_counts.count + excluded.count,
              last_at = greatest(attempt_counts.last_at, excluded.last_at),
              first_at = least(attempt_counts.first_at, excluded.first_at),
              request_id = CASE WHEN excluded.first_at < attempt_counts.first_at THEN excluded.request_id ELSE attempt_counts.request_id END,
              trace_id = CASE WHEN excluded.first_at < attempt_counts.first_at THEN excluded.trace_id ELSE attempt_counts.trace_id END,
              instance = CASE WHEN excluded.first_at < attempt_counts.first_at THEN excluded.instance ELSE attempt_counts.instance END;

-- name: ListHistoryAttempts :many
-- The attempts of a merchant's key of one kind (in every scope of the key:
-- the merchant's own, and its checkout pages'; a support desk asks by the
-- key alone), with what the history reads of them rather than writes: a
-- fresh charge's answer and finalization are its attempt's row.
SELECT a.id, a.created_at, a.completed_at, a.status, charge_attempt_provider_key(a) AS provider_key, a.failure_code, a.expires_at,
       charge_attempt_claim_source(a) AS claim_source,
       coalesce(c.provider_charge_id, r.provider_refund_id, '')::text AS provider_id
FROM charge_attempts a
LEFT JOIN charges c ON c.id = a.charge_id AND a.kind = 'charge'
LEFT JOIN refunds r ON r.id = a.refund_id
WHERE a.merchant_id = @merchant_id AND a.idempotency_key = @idempotency_key AND a.kind = @kind;

-- name: ListHistory :many
-- The history rows of the attempts attempt_ids, and the refusals before
-- any claim of a merchant's key of one kind, oldest first.
SELECT h.attempt_id, h.at, h.request_id, h.trace_id, h.span_id, h.instance, h.entries, h.id
FROM attempt_history h
WHERE h.attempt_id = ANY(sqlc.arg(attempt_ids)::uuid[])
UNION ALL
SELECT h.attempt_id, h.at, h.request_id, h.trace_id, h.span_id, h.instance, h.entries, h.id
FROM attempt_history h
WHERE h.attempt_id IS NULL
  AND h.merchant_id = @merchant_id AND h.idempotency_key = @idempotency_key AND h.kind = @kind
ORDER BY at, id
LIMIT sqlc.arg(max_rows)::integer;

-- name: ListHistoryCounts :many
-- The counted rows of the attempts attempt_ids.
SELECT attempt_id, type, count, first_at, last_at, request_id, trace_id, instance
FROM attempt_counts
WHERE attempt_id = ANY(sqlc.arg(attempt_ids)::uuid[]);

-- name: ListHistoryEvents :many
-- The outbox events of the attempts attempt_ids: written with the result
-- (occurred_at), published on the stream (sent_at); the history reads
-- them rather than writes them again. One part per index that names
-- attempt_id, each with its index's predicate, so that each reads its
-- index: the outcome's (_attempt_idx), the action's (_action_idx), the
-- refunds' (_refund_idx), and every other type (_attempt_other_idx). The
-- parts' types are every type, each in one part.
SELECT id, type, attempt_id, occurred_at, sent_at FROM charge_events
WHERE attempt_id = ANY(sqlc.arg(attempt_ids)::uuid[]) AND type IN ('charge.succeeded', 'charge.failed')
UNION ALL
SELECT id, type, attempt_id, occurred_at, sent_at FROM charge_events
WHERE attempt_id = ANY(sqlc.arg(attempt_ids)::uuid[]) AND type = 'charge.requires_action'
UNION ALL
SELECT id, type, attempt_id, occurred_at, sent_at FROM charge_events
WHERE attempt_id = ANY(sqlc.arg(attempt_ids)::uuid[]) AND type IN ('refund.succeeded', 'refund.failed', 'charge.late_refunded')
UNION ALL
SELECT id, type, attempt_id, occurred_at, sent_at FROM charge_events
WHERE attempt_id = ANY(sqlc.arg(attempt_ids)::uuid[])
  AND attempt_id IS NOT NULL
  AND type NOT IN ('charge.succeeded', 'charge.failed', 'charge.requires_action',
                   'refund.succeeded', 'refund.failed', 'charge.late_refunded');

-- name: ClaimSpan :one
-- Who claimed an attempt (history.Source as JSON), for a later holder's
-- link back to its span.
SELECT charge_attempt_claim_source(a) AS claim_source FROM charge_attempts a WHERE id = @id;

-- name: DeleteOldHistory :execrows
-- Retention of what the forgetting of an attempt left (DeleteExpiredChargeAttempts
-- forgets its history with it): a small batch of history rows older than
-- cutoff that no attempt holds any more, a refusal before any claim or a
-- row written after its attempt was forgotten.
DELETE FROM attempt_history
WHERE ctid = ANY (ARRAY(
    SELECT h.ctid FROM attempt_history h
    WHERE h.at < sqlc.arg(cutoff)::timestamptz
      AND (h.attempt_id IS NULL OR NOT EXISTS (SELECT 1 FROM charge_attempts a WHERE a.id = h.attempt_id))
    LIMIT sqlc.arg(max_rows)::integer
));

-- name: ListHistoryMerchants :many
-- The merchants that have a history under a key of one kind, for `charges
-- show KEY`, which an operator runs by the key alone.
SELECT m.id, m.name FROM merchants m
WHERE EXISTS (
    SELECT 1 FROM charge_attempts a
    WHERE a.merchant_id = m.id AND a.idempotency_key = @idempotency_key AND a.kind = @kind
) OR EXISTS (
    SELECT 1 FROM attempt_history h
    WHERE h.attempt_id IS NULL AND h.merchant_id = m.id AND h.idempotency_key = @idempotency_key AND h.kind = @kind
)
ORDER BY m.name;
