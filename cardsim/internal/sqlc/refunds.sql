-- name: LockRefundedCharge :one
-- Takes the row lock of the charge a refund names, held to the end of the
-- refund's transaction: the refunds of one charge are decided one at a
-- time, each counting those committed before it (RefundsHeld, a statement
-- of its own and so of a newer snapshot), so that no interleaving refunds
-- more than the charge's amount.
SELECT * FROM cardsim.charges
WHERE id = @id
FOR UPDATE;

-- name: RefundsHeld :one
-- What the charge's refunds hold against its amount (those pending or
-- succeeded) and how many it has had, failed ones included, under the
-- lock of LockRefundedCharge.
SELECT coalesce(sum(amount) FILTER (WHERE status IN ('pending', 'succeeded')), 0)::bigint AS held,
       count(*) AS made
FROM cardsim.refunds
WHERE charge_id = @charge_id;

-- name: InsertRefund :one
-- Stores a refund once per idempotency key: of concurrent requests with one
-- key, exactly one insert wins and the others get no row and replay it. It
-- settles settle_after from now: a refund final at once, after zero.
INSERT INTO cardsim.refunds (
    id, charge_id, idempotency_key, request_hash, amount, currency, reason,
    status, metadata, settles_at, settles_to
) VALUES (
    @id, @charge_id, @idempotency_key, @request_hash, @amount, @currency, @reason,
    @status, @metadata, now() + @settle_after::interval, @settles_to
)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: GetRefundByIdempotencyKey :one
-- Loads the refund of a key, to replay it (after comparing request hashes).
SELECT * FROM cardsim.refunds
WHERE idempotency_key = @idempotency_key;

-- name: GetRefund :one
-- Serves GET /v1/refunds/{id}.
SELECT * FROM cardsim.refunds
WHERE id = @id;

-- name: ListRefunds :many
-- Serves GET /v1/refunds: chargeonce finds a refund here by its key, or
-- among its charge's by the attempt in its metadata. A NULL filter means
-- "not given"; starting_after pages as in ListCharges.
SELECT * FROM cardsim.refunds r
WHERE (sqlc.narg(charge_id)::text IS NULL OR r.charge_id = sqlc.narg(charge_id))
  AND (sqlc.narg(idempotency_key)::text IS NULL OR r.idempotency_key = sqlc.narg(idempotency_key))
  AND (sqlc.narg(merchant)::text IS NULL OR r.metadata ->> 'merchant' = sqlc.narg(merchant))
  AND (sqlc.narg(status)::text IS NULL OR r.status = sqlc.narg(status))
  AND (sqlc.narg(starting_after)::text IS NULL
       OR (r.created_at, r.id) < (SELECT s.created_at, s.id FROM cardsim.refunds s
                                  WHERE s.id = sqlc.narg(starting_after)))
ORDER BY r.created_at DESC, r.id DESC
LIMIT @row_limit;

-- name: SettleDueRefunds :exec
-- Makes final the pending refunds whose settles_at has passed, as every read
-- of refunds or charges does first, so that no background loop is needed.
-- A refund that another statement holds is skipped rather than waited for:
-- that statement is making it final already, and readers that wait on
-- each other's rows could deadlock.
UPDATE cardsim.refunds
SET status = settles_to,
    failure_code = CASE WHEN settles_to = 'failed' THEN @failure_code::text END,
    failure_message = CASE WHEN settles_to = 'failed' THEN @failure_message::text END
WHERE status = 'pending'
  AND id IN (
    SELECT id FROM cardsim.refunds
    WHERE status = 'pending' AND settles_at <= now()
    FOR UPDATE SKIP LOCKED
  );

-- name: FailRefund :one
-- POST /v1/refunds/{id}/fail: the refund fails, even after it succeeded (the
-- card was closed). Only a refund that has not failed moves; a second call
-- gets no row.
UPDATE cardsim.refunds
SET status = 'failed', failure_code = @failure_code::text, failure_message = @failure_message::text
WHERE id = @id AND status IN ('pending', 'succeeded')
RETURNING *;
