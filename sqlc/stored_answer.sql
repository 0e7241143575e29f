-- name: StoreAnswers :exec
-- Keeps a batch of replays' answers, one per element of the arrays; an
-- answer already kept for the same request stays as it is.
INSERT INTO stored_answers (merchant_id, request_hash, attempt_id, kind, idempotency_key, expires_at, operation, answer)
SELECT unnest(sqlc.arg(merchant_id)::uuid[]), unnest(sqlc.arg(request_hash)::bytea[]), unnest(sqlc.arg(attempt_id)::uuid[]),
       unnest(sqlc.arg(kind)::text[]), unnest(sqlc.arg(idempotency_key)::text[]), unnest(sqlc.arg(expires_at)::timestamptz[]),
       unnest(sqlc.arg(operation)::text[]), unnest(sqlc.arg(answer)::bytea[])
ON CONFLICT DO NOTHING;

-- name: StoredAnswer :one
-- The answer kept for the merchant's request, by the primary key.
SELECT attempt_id, kind, idempotency_key, expires_at, operation, answer
FROM stored_answers
WHERE merchant_id = @merchant_id AND request_hash = @request_hash;
