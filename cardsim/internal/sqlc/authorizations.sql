-- name: ExpireDueAuthorizations :exec
-- Makes expired every open authorization whose time has passed, as every
-- read of charges does first, so that no background loop is needed. It
-- waits for a capture or void that holds such a charge, and then sees how
-- that ended: an authorization captured in full is not expired after,
-- and one expired is not captured after. The rows are locked in one order,
-- so that two of these statements cannot deadlock.
UPDATE cardsim.charges
SET authorization_status = 'expired'
WHERE authorization_status = 'open'
  AND id IN (
    SELECT id FROM cardsim.charges
    WHERE authorization_status = 'open' AND authorization_expires_at <= now()
    ORDER BY id
    FOR NO KEY UPDATE
  );

-- name: LockAuthorization :one
-- Takes the row lock of the charge that a capture or void names, held to
-- the end of its transaction: a charge's captures, voids, refunds and
-- expiry are decided one at a time. lapsed says whether its authorization
-- is open but past its time, by the database's clock.
SELECT sqlc.embed(c),
       coalesce(c.authorization_status = 'open' AND c.authorization_expires_at <= now(), false)::boolean AS lapsed
FROM cardsim.charges c
WHERE c.id = @id
FOR NO KEY UPDATE;

-- name: CaptureAuthorization :one
-- Captures amount of an open authorization. The guard is the statement's
-- own: only an open authorization within its time, and only what remains
-- of it, so that no interleaving of captures takes more than was
-- authorized (and charges_amount_captured_check backs it). A final capture,
-- or one that takes the rest, closes the authorization.
UPDATE cardsim.charges
SET amount_captured = amount_captured + @amount::bigint,
    authorization_status = CASE
        WHEN @final::boolean OR amount_captured + @amount::bigint = amount THEN 'captured'
        ELSE 'open' END
WHERE id = @id
  AND authorization_status = 'open'
  AND authorization_expires_at > now()
  AND amount_captured + @amount::bigint <= amount
RETURNING *;

-- name: VoidAuthorization :one
-- Voids an open authorization within its time that nothing was captured
-- of; guarded by the statement, as CaptureAuthorization.
UPDATE cardsim.charges
SET authorization_status = 'voided'
WHERE id = @id
  AND authorization_status = 'open'
  AND authorization_expires_at > now()
  AND amount_captured = 0
RETURNING *;

-- name: ExpireAuthorizationNow :one
-- POST /v1/charges/{id}/expire, a control for tests: an open authorization
-- lapses now. Only an open one moves; any other gets no row.
UPDATE cardsim.charges
SET authorization_status = 'expired', authorization_expires_at = least(authorization_expires_at, now())
WHERE id = @id AND authorization_status = 'open'
RETURNING *;

-- name: InsertCapture :one
-- Stores a capture once per idempotency key: of concurrent requests with
-- one key, exactly one insert wins, and the others get no row and replay it.
INSERT INTO cardsim.captures (
    id, charge_id, idempotency_key, request_hash, amount, currency, final,
    status, failure_code, failure_message, metadata
) VALUES (
    @id, @charge_id, @idempotency_key, @request_hash, @amount, @currency, @final,
    @status, @failure_code, @failure_message, @metadata
)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: GetCaptureByIdempotencyKey :one
-- Loads the capture of a key, to replay it (after comparing request hashes).
SELECT * FROM cardsim.captures
WHERE idempotency_key = @idempotency_key;

-- name: GetCapture :one
-- Serves GET /v1/captures/{id}.
SELECT * FROM cardsim.captures
WHERE id = @id;

-- name: ListCaptures :many
-- Serves GET /v1/captures: chargeonce finds a capture here by its key, or
-- by the attempt in its metadata. A NULL filter means "not given";
-- starting_after pages as in ListCharges.
SELECT * FROM cardsim.captures p
WHERE (sqlc.narg(charge_id)::text IS NULL OR p.charge_id = sqlc.narg(charge_id))
  AND (sqlc.narg(idempotency_key)::text IS NULL OR p.idempotency_key = sqlc.narg(idempotency_key))
  AND (sqlc.narg(attempt_id)::text IS NULL
       OR p.metadata ->> 'chargeonce_attempt_id' = sqlc.narg(attempt_id))
  AND (sqlc.narg(merchant)::text IS NULL OR p.metadata ->> 'merchant' = sqlc.narg(merchant))
  AND (sqlc.narg(status)::text IS NULL OR p.status = sqlc.narg(status))
  AND (sqlc.narg(starting_after)::text IS NULL
       OR (p.created_at, p.id) < (SELECT s.created_at, s.id FROM cardsim.captures s
                                  WHERE s.id = sqlc.narg(starting_after)))
ORDER BY p.created_at DESC, p.id DESC
LIMIT @row_limit;

-- name: InsertVoid :one
-- Stores a void once per idempotency key, as InsertCapture.
INSERT INTO cardsim.voids (id, charge_id, idempotency_key, request_hash, metadata)
VALUES (@id, @charge_id, @idempotency_key, @request_hash, @metadata)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: GetVoidByIdempotencyKey :one
-- Loads the void of a key, to replay it (after comparing request hashes).
SELECT * FROM cardsim.voids
WHERE idempotency_key = @idempotency_key;

-- name: GetVoid :one
-- Serves GET /v1/voids/{id}.
SELECT * FROM cardsim.voids
WHERE id = @id;

-- name: ListVoids :many
-- Serves GET /v1/voids, filtered and paged as ListCaptures.
SELECT * FROM cardsim.voids v
WHERE (sqlc.narg(charge_id)::text IS NULL OR v.charge_id = sqlc.narg(charge_id))
  AND (sqlc.narg(idempotency_key)::text IS NULL OR v.idempotency_key = sqlc.narg(idempotency_key))
  AND (sqlc.narg(attempt_id)::text IS NULL
       OR v.metadata ->> 'chargeonce_attempt_id' = sqlc.narg(attempt_id))
  AND (sqlc.narg(merchant)::text IS NULL OR v.metadata ->> 'merchant' = sqlc.narg(merchant))
  AND (sqlc.narg(starting_after)::text IS NULL
       OR (v.created_at, v.id) < (SELECT s.created_at, s.id FROM cardsim.voids s
                                  WHERE s.id = sqlc.narg(starting_after)))
ORDER BY v.created_at DESC, v.id DESC
LIMIT @row_limit;
