-- name: ClaimChargeAttempt :one
-- The claim. Inserts the attempt unless this merchant already used the key.
-- A row back means this request owns the attempt and may call the provider;
-- no row means another request claimed the key first. The unique index on
-- (merchant_id, idempotency_key) makes this atomic across instances.
INSERT INTO charge_attempts (
    id, merchant_id, idempotency_key, fingerprint, provider_key,
    amount, currency, payment_method, order_id, description, expires_at
) VALUES (
    @id, @merchant_id, @idempotency_key, @fingerprint, @provider_key,
    @amount, @currency, @payment_method, @order_id, @description,
    now() + sqlc.arg(retention_ms)::bigint * interval '1 millisecond'
)
ON CONFLICT (merchant_id, idempotency_key) DO NOTHING
RETURNING *;

-- name: GetChargeAttempt :one
-- Loads an attempt with its charge, for a replay or a status query. Scoped by
-- merchant, so nobody reads another merchant's result.
SELECT sqlc.embed(a),
       c.provider_charge_id,
       c.created_at AS charge_created_at
FROM charge_attempts a
LEFT JOIN charges c ON c.id = a.charge_id
WHERE a.merchant_id = @merchant_id AND a.idempotency_key = @idempotency_key;

-- name: InsertCharge :one
-- Records money that moved. Runs in the same transaction as
-- SucceedChargeAttempt, so a charge never exists without its attempt's result.
INSERT INTO charges (id, merchant_id, amount, currency, order_id, description, provider_charge_id)
VALUES (@id, @merchant_id, @amount, @currency, @order_id, @description, @provider_charge_id)
RETURNING *;

-- name: SucceedChargeAttempt :one
-- Finalizes an attempt as SUCCEEDED. Fenced on the attempt number the caller
-- was given: a holder that lost the attempt to someone else updates nothing.
UPDATE charge_attempts
SET status = 'SUCCEEDED',
    charge_id = @charge_id,
    completed_at = now(),
    updated_at = now(),
    expires_at = now() + sqlc.arg(retention_ms)::bigint * interval '1 millisecond'
WHERE id = @id AND status = 'PROCESSING' AND attempt = @attempt
RETURNING *;

-- name: FailChargeAttempt :one
-- Finalizes an attempt as FAILED with the provider's definitive reason.
-- Fenced like SucceedChargeAttempt.
UPDATE charge_attempts
SET status = 'FAILED',
    failure_code = sqlc.arg(failure_code)::text,
    failure_message = sqlc.arg(failure_message)::text,
    completed_at = now(),
    updated_at = now(),
    expires_at = now() + sqlc.arg(retention_ms)::bigint * interval '1 millisecond'
WHERE id = @id AND status = 'PROCESSING' AND attempt = @attempt
RETURNING *;
