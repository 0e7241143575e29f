-- name: InsertCharge :one
-- Stores a charge atomically per idempotency key: under concurrent identical
-- requests exactly one insert wins, the others get no row and replay it.
-- A manual charge that succeeded is an authorization, open until
-- authorization_window from now.
INSERT INTO cardsim.charges (
    id, idempotency_key, request_hash, amount, currency, payment_method,
    description, status, failure_code, failure_message, metadata, return_url,
    capture_method, authorization_status, authorization_expires_at
) VALUES (
    @id, @idempotency_key, @request_hash, @amount, @currency, @payment_method,
    @description, @status, @failure_code, @failure_message, @metadata, @return_url,
    @capture_method,
    CASE WHEN @capture_method = 'manual' AND @status = 'succeeded' THEN 'open' END,
    CASE WHEN @capture_method = 'manual' AND @status = 'succeeded' THEN now() + @authorization_window::interval END
)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: GetChargeByIdempotencyKey :one
-- Loads the charge that won the key after an insert found a conflict, to
-- compare request hashes and replay the first answer. Like GetCharge and
-- ListCharges it adds amount_refunded, the sum of the charge's succeeded
-- refunds; the queries below it return a charge that is new or that waited
-- until then, which has none, since only a succeeded charge is refunded.
SELECT sqlc.embed(c),
       (SELECT coalesce(sum(r.amount), 0) FROM cardsim.refunds r
        WHERE r.charge_id = c.id AND r.status = 'succeeded')::bigint AS amount_refunded
FROM cardsim.charges c
WHERE c.idempotency_key = @idempotency_key;

-- name: GetCharge :one
-- Serves GET /v1/charges/{id}.
SELECT sqlc.embed(c),
       (SELECT coalesce(sum(r.amount), 0) FROM cardsim.refunds r
        WHERE r.charge_id = c.id AND r.status = 'succeeded')::bigint AS amount_refunded
FROM cardsim.charges c
WHERE c.id = @id;

-- name: ListCharges :many
-- Serves GET /v1/charges: tests, the demo and the reconciler count and find
-- real charges here. A NULL filter means "not given". A page after the first
-- starts after the charge starting_after, in the list's order, as Stripe's
-- lists page.
SELECT sqlc.embed(c),
       (SELECT coalesce(sum(r.amount), 0) FROM cardsim.refunds r
        WHERE r.charge_id = c.id AND r.status = 'succeeded')::bigint AS amount_refunded
FROM cardsim.charges c
WHERE (sqlc.narg(idempotency_key)::text IS NULL OR c.idempotency_key = sqlc.narg(idempotency_key))
  AND (sqlc.narg(client_idempotency_key)::text IS NULL
       OR c.metadata ->> 'client_idempotency_key' = sqlc.narg(client_idempotency_key))
  AND (sqlc.narg(merchant)::text IS NULL OR c.metadata ->> 'merchant' = sqlc.narg(merchant))
  AND (sqlc.narg(attempt_id)::text IS NULL
       OR c.metadata ->> 'chargeonce_attempt_id' = sqlc.narg(attempt_id))
  AND (sqlc.narg(order_id)::text IS NULL OR c.metadata ->> 'order_id' = sqlc.narg(order_id))
  AND (sqlc.narg(status)::text IS NULL OR c.status = sqlc.narg(status))
  AND (sqlc.narg(capture_method)::text IS NULL OR c.capture_method = sqlc.narg(capture_method))
  AND (sqlc.narg(authorization_status)::text IS NULL
       OR c.authorization_status = sqlc.narg(authorization_status))
  AND (sqlc.narg(starting_after)::text IS NULL
       OR (c.created_at, c.id) < (SELECT s.created_at, s.id FROM cardsim.charges s
                                  WHERE s.id = sqlc.narg(starting_after)))
ORDER BY c.created_at DESC, c.id DESC
LIMIT @row_limit;

-- name: CompleteAuthentication :one
-- The shopper passed the challenge. Only a waiting charge moves, so that of a
-- complete, a fail and a cancel racing for one charge exactly one wins; the
-- others get no row. A manual charge is authorized now, for
-- authorization_window.
UPDATE cardsim.charges
SET status = 'succeeded',
    authorization_status = CASE WHEN capture_method = 'manual' THEN 'open' END,
    authorization_expires_at = CASE WHEN capture_method = 'manual' THEN now() + @authorization_window::interval END
WHERE id = @id AND status = 'requires_action'
RETURNING *;

-- name: FailAuthentication :one
-- The shopper failed (or refused) the challenge; conditional as
-- CompleteAuthentication.
UPDATE cardsim.charges
SET status = 'failed', failure_code = @failure_code::text, failure_message = @failure_message::text
WHERE id = @id AND status = 'requires_action'
RETURNING *;

-- name: CancelWaitingCharge :one
-- The caller gave up on the shopper (POST /v1/charges/{id}/cancel);
-- conditional as CompleteAuthentication.
UPDATE cardsim.charges
SET status = 'canceled', failure_code = @failure_code::text, failure_message = @failure_message::text,
    cancellation_reason = @cancellation_reason
WHERE id = @id AND status = 'requires_action'
RETURNING *;
