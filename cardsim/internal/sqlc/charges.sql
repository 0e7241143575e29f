-- name: InsertCharge :one
-- Stores a charge atomically per idempotency key: under concurrent identical
-- requests exactly one insert wins, the others get no row and replay it.
INSERT INTO cardsim.charges (
    id, idempotency_key, request_hash, amount, currency, payment_method,
    description, status, failure_code, failure_message, metadata
) VALUES (
    @id, @idempotency_key, @request_hash, @amount, @currency, @payment_method,
    @description, @status, @failure_code, @failure_message, @metadata
)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: GetChargeByIdempotencyKey :one
-- Loads the charge that won the key after an insert found a conflict, to
-- compare request hashes and replay the first answer.
SELECT * FROM cardsim.charges
WHERE idempotency_key = @idempotency_key;

-- name: GetCharge :one
-- Serves GET /v1/charges/{id}.
SELECT * FROM cardsim.charges
WHERE id = @id;

-- name: ListCharges :many
-- Serves GET /v1/charges: tests, the demo and the reconciler count and find
-- real charges here. A NULL filter means "not given".
SELECT * FROM cardsim.charges
WHERE (sqlc.narg(idempotency_key)::text IS NULL OR idempotency_key = sqlc.narg(idempotency_key))
  AND (sqlc.narg(client_idempotency_key)::text IS NULL
       OR metadata ->> 'client_idempotency_key' = sqlc.narg(client_idempotency_key))
  AND (sqlc.narg(merchant)::text IS NULL OR metadata ->> 'merchant' = sqlc.narg(merchant))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;
