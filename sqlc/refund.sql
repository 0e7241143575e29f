-- name: LockChargeForRefund :one
-- The first statement of a refund's claim: the merchant's charge, locked
-- until the claim's transaction ends, so that the refunds of one charge are
-- claimed one at a time and a default amount (what remains) is exact.
-- Refunds apply to what was captured: refundable is the whole amount of an
-- automatic charge, what the captures took of a manual one.
SELECT id, amount, currency, amount_reserved, amount_refunded, provider_charge_id,
       (CASE capture_method WHEN 'manual' THEN amount_captured ELSE amount END)::bigint AS refundable
FROM charges
WHERE id = @id AND merchant_id = @merchant_id
FOR UPDATE;

-- name: ClaimRefundAttempt :one
-- A refund's claim of its key, in the transaction that reserves its amount:
-- no row when this merchant already used the key (the caller reads the
-- stored attempt and rolls back). A refund's key is always the merchant's
-- own (key_session_id NULL): only a secret key refunds.
INSERT INTO charge_attempts (
    id, merchant_id, idempotency_key, fingerprint, provider_key, kind,
    amount, currency, charge_id, description, locked_until, expires_at,
    claim_request_id, claim_instance, claim_source, created_at
)
VALUES (@id, @merchant_id, @idempotency_key, @fingerprint, @provider_key, 'refund',
        @amount, @currency, @charge_id, sqlc.narg(description),
        sqlc.arg(locked_until)::timestamptz, sqlc.arg(expires_at)::timestamptz,
        sqlc.narg(claim_request_id)::uuid, sqlc.narg(claim_instance)::text, sqlc.narg(claim_source)::jsonb,
        sqlc.arg(created_at)::timestamptz)
ON CONFLICT (merchant_id, idempotency_key, key_session_id) DO NOTHING
RETURNING *;

-- name: ReserveRefund :one
-- Reserves a refund's amount of its charge: one conditional update, so that
-- the refunds running and succeeded never add up to more than was captured
-- (charges_refunds_check holds it too). No row: too much.
UPDATE charges
SET amount_reserved = amount_reserved + sqlc.arg(amount)::bigint
WHERE id = @id AND amount_reserved + sqlc.arg(amount)::bigint
      <= CASE capture_method WHEN 'manual' THEN amount_captured ELSE amount END
RETURNING (amount - amount_reserved)::bigint AS remaining;

-- name: ReleaseRefundReservation :exec
-- Gives a refund's reservation back, in the transaction that fails it.
UPDATE charges
SET amount_reserved = amount_reserved - sqlc.arg(amount)::bigint
WHERE id = @id;

-- name: InsertRefund :one
-- Records money that went back, in the transaction that finalizes its
-- attempt SUCCEEDED; the charge's refunded total moves with it.
WITH applied AS (
    UPDATE charges SET amount_refunded = amount_refunded + sqlc.arg(amount)::bigint
    WHERE charges.id = sqlc.arg(charge_id)::uuid
)
INSERT INTO refunds (id, merchant_id, charge_id, amount, currency, reason, provider_refund_id)
VALUES (@id, @merchant_id, sqlc.arg(charge_id)::uuid, sqlc.arg(amount)::bigint, @currency, sqlc.narg(reason), @provider_refund_id)
RETURNING *;

-- name: SucceedRefundAttempt :one
-- Finalizes a refund attempt as SUCCEEDED with its refund. Fenced on the
-- fence, like RecordChargeSucceeded.
UPDATE charge_attempts
SET status = 'SUCCEEDED',
    refund_id = @refund_id,
    completed_at = sqlc.arg(now)::timestamptz,
    expires_at = sqlc.arg(expires_at)::timestamptz
WHERE id = @id AND status = 'PROCESSING' AND fence = @fence
RETURNING *;

-- name: PendRefundAttempt :one
-- Records that the provider accepted the refund and has not made it final:
-- the first time, since when. The holder's lease ends with it, and
-- locked_until becomes the reconciler's next read. Fenced like the
-- finalizing writes.
UPDATE charge_attempts
SET pending_since = coalesce(pending_since, sqlc.arg(now)::timestamptz),
    locked_until = sqlc.arg(next_check)::timestamptz
WHERE id = @id AND status = 'PROCESSING' AND fence = @fence
RETURNING *;

-- name: ListChargeRefunds :many
-- The merchant's charge's refunds, oldest first.
SELECT * FROM refunds WHERE charge_id = @charge_id AND merchant_id = @merchant_id ORDER BY created_at, id;

-- name: GetChargeRefunded :one
-- What the merchant's charge has refunded.
SELECT amount_refunded FROM charges WHERE id = @id AND merchant_id = @merchant_id;

-- name: GetRefundCharge :one
-- The provider's id of a refund attempt's charge.
SELECT provider_charge_id FROM charges WHERE id = @id;

-- name: ListProcessingRefunds :many
-- For operators: refund attempts still PROCESSING, oldest first, with
-- their charge and whether the provider has the refund pending.
SELECT a.*, m.name AS merchant_name, c.provider_charge_id
FROM charge_attempts a
JOIN merchants m ON m.id = a.merchant_id
JOIN charges c ON c.id = a.charge_id
WHERE a.kind = 'refund' AND a.status = 'PROCESSING' AND a.completed_at IS NULL
ORDER BY a.created_at
LIMIT sqlc.arg(max_attempts)::integer;

-- name: ReverseRefund :one
-- A refund that succeeded and failed later (the card was closed): FAILED,
-- once, with when and why; the caller gives its amount back in the same
-- transaction.
UPDATE refunds
SET status = 'FAILED',
    failure_code = sqlc.arg(failure_code)::text,
    failure_message = sqlc.arg(failure_message)::text,
    failed_at = sqlc.arg(now)::timestamptz
WHERE id = @id AND status = 'SUCCEEDED'
RETURNING *;

-- name: GiveBackRefund :exec
-- Gives a reversed refund's amount back to its charge: refundable again.
UPDATE charges
SET amount_refunded = amount_refunded - sqlc.arg(amount)::bigint,
    amount_reserved = amount_reserved - sqlc.arg(amount)::bigint
WHERE id = @id;
