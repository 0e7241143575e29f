-- name: LockChargeForCapture :one
-- The first statement of a capture's or a void's claim: the merchant's
-- charge, locked until the claim's transaction ends, so that the captures
-- and the void of one charge are claimed one at a time, and what they may
-- take is exact.
SELECT id, amount, currency, provider_charge_id, capture_method, amount_captured, capture_reserved,
       final_capture_claimed, void_claimed, authorization_expires_at, authorization_expired_at
FROM charges
WHERE id = @id AND merchant_id = @merchant_id
FOR UPDATE;

-- name: ClaimCaptureAttempt :one
-- A capture's or a void's claim of its key, in the transaction that
-- reserves what it takes: no row when this merchant already used the key
-- (the caller reads the stored attempt and rolls back). Its key is always
-- the merchant's own: only a secret key captures or voids.
INSERT INTO charge_attempts (
    id, merchant_id, idempotency_key, fingerprint, provider_key, kind,
    amount, currency, charge_id, capture_final, locked_until, expires_at,
    claim_request_id, claim_instance, claim_source, created_at
)
VALUES (@id, @merchant_id, @idempotency_key, @fingerprint, @provider_key, sqlc.arg(kind)::text,
        @amount, @currency, @charge_id, sqlc.narg(capture_final)::boolean,
        sqlc.arg(locked_until)::timestamptz, sqlc.arg(expires_at)::timestamptz,
        sqlc.narg(claim_request_id)::uuid, sqlc.narg(claim_instance)::text, sqlc.narg(claim_source)::jsonb,
        sqlc.arg(created_at)::timestamptz)
ON CONFLICT (merchant_id, idempotency_key, key_session_id) DO NOTHING
RETURNING *;

-- name: ReserveCapture :one
-- Reserves a capture's amount of its authorization: one conditional
-- update, so that the captures running and succeeded never add up to more
-- than was authorized, none follows a final one, and none passes a void
-- claimed first (charges_captures_check holds it too). No row: refused.
UPDATE charges
SET capture_reserved = capture_reserved + sqlc.arg(amount)::bigint,
    final_capture_claimed = final_capture_claimed OR sqlc.arg(final)::boolean
WHERE id = @id AND capture_method = 'manual' AND NOT final_capture_claimed AND NOT void_claimed
  AND authorization_expired_at IS NULL AND capture_reserved + sqlc.arg(amount)::bigint <= amount
RETURNING id;

-- name: ReleaseCaptureReservation :exec
-- Gives a failed capture's reservation back, in the transaction that fails
-- it; a final one's failure lets captures be claimed again.
UPDATE charges
SET capture_reserved = capture_reserved - sqlc.arg(amount)::bigint,
    final_capture_claimed = final_capture_claimed AND NOT sqlc.arg(final)::boolean
WHERE id = @id;

-- name: RecordCapture :one
-- Records a capture that the provider made, once per provider capture
-- (captures_provider_capture_id_unique), and what its charge captured.
WITH capture AS (
    INSERT INTO captures (id, merchant_id, charge_id, amount, currency, final, provider_capture_id, created_at)
    VALUES (@id, @merchant_id, @charge_id, @amount, @currency, @final, @provider_capture_id, sqlc.arg(now)::timestamptz)
    RETURNING *
),
charge AS (
    UPDATE charges SET amount_captured = amount_captured + (SELECT amount FROM capture)
    WHERE charges.id = @charge_id
)
SELECT * FROM capture;

-- name: SucceedCaptureAttempt :one
-- Finalizes a capture attempt as SUCCEEDED with its capture, fenced like
-- the other finalizing writes.
UPDATE charge_attempts
SET status = 'SUCCEEDED',
    capture_id = sqlc.arg(capture_id)::uuid,
    completed_at = sqlc.arg(now)::timestamptz,
    expires_at = sqlc.arg(expires_at)::timestamptz
WHERE id = @id AND status = 'PROCESSING' AND fence = @fence
RETURNING *;

-- name: ReserveVoid :one
-- Claims the void of an authorization on its charge: only while nothing
-- was captured or is being captured, and nothing voided it, so that a
-- capture and a void of one charge never both pass (charges_captures_check
-- holds it too). No row: refused.
UPDATE charges
SET void_claimed = true
WHERE id = @id AND capture_method = 'manual' AND NOT void_claimed AND capture_reserved = 0
  AND authorization_expired_at IS NULL
RETURNING id;

-- name: ReleaseVoid :exec
-- Gives a failed void's claim back, in the transaction that fails it.
UPDATE charges SET void_claimed = false WHERE id = @id AND voided_at IS NULL;

-- name: RecordVoid :exec
-- Records that the provider voided the authorization.
UPDATE charges SET voided_at = coalesce(voided_at, sqlc.arg(now)::timestamptz) WHERE id = @id;

-- name: SucceedVoidAttempt :one
-- Finalizes a void attempt as SUCCEEDED, fenced like the other finalizing
-- writes.
UPDATE charge_attempts
SET status = 'SUCCEEDED',
    completed_at = sqlc.arg(now)::timestamptz,
    expires_at = sqlc.arg(expires_at)::timestamptz
WHERE id = @id AND status = 'PROCESSING' AND fence = @fence
RETURNING *;

-- name: GetChargeCapture :one
-- Where the merchant's charge stands in its captures, for its
-- captureStatus and amounts.
SELECT c.capture_method, c.amount, c.amount_captured, c.capture_reserved, c.final_capture_claimed,
       c.void_claimed, c.voided_at, c.authorization_expires_at, c.authorization_expired_at,
       EXISTS (SELECT 1 FROM captures k WHERE k.charge_id = c.id AND k.final) AS final_captured
FROM charges c
WHERE c.id = @id AND c.merchant_id = @merchant_id;

-- name: ListChargeCaptures :many
-- The merchant's charge's captures, oldest first.
SELECT * FROM captures
WHERE charge_id = @charge_id AND merchant_id = @merchant_id
ORDER BY created_at, id;

-- name: ListOpenAuthorizations :many
-- Authorizations still open (manual charges neither captured in full nor
-- finally, voided or expired), oldest first, for operators.
SELECT c.id, m.name AS merchant_name, c.amount, c.currency, c.order_id, c.amount_captured, c.capture_reserved,
       c.provider_charge_id, c.created_at, c.authorization_expires_at
FROM charges c
JOIN merchants m ON m.id = c.merchant_id
WHERE c.capture_method = 'manual' AND c.voided_at IS NULL AND c.authorization_expired_at IS NULL
  AND NOT c.final_capture_claimed AND NOT c.void_claimed AND c.amount_captured < c.amount
ORDER BY c.created_at, c.id
LIMIT sqlc.arg(max_charges)::integer;

-- name: TakeExpiringAuthorizations :many
-- Open authorizations whose expiry comes before warn_before and which were
-- not warned about yet, each marked warned: the transaction writes their
-- charge.authorization_expiring. SKIP LOCKED lets instances share them.
UPDATE charges
SET expiry_warned_at = sqlc.arg(now)::timestamptz
WHERE id IN (
    SELECT id FROM charges
    WHERE capture_method = 'manual' AND voided_at IS NULL AND authorization_expired_at IS NULL
      AND NOT final_capture_claimed AND NOT void_claimed AND amount_captured < amount
      AND expiry_warned_at IS NULL AND authorization_expires_at <= sqlc.arg(warn_before)::timestamptz
    ORDER BY authorization_expires_at
    LIMIT sqlc.arg(max_charges)::integer
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: DueExpiredAuthorizations :many
-- Open authorizations past their expiry with no capture or void running,
-- to read at the provider and record as expired.
SELECT * FROM charges
WHERE capture_method = 'manual' AND voided_at IS NULL AND authorization_expired_at IS NULL
  AND NOT final_capture_claimed AND NOT void_claimed AND capture_reserved = amount_captured
  AND amount_captured < amount AND authorization_expires_at <= sqlc.arg(now)::timestamptz
ORDER BY authorization_expires_at
LIMIT sqlc.arg(max_charges)::integer;

-- name: ExpireAuthorization :one
-- Records that the authorization lapsed, unless a capture or a void was
-- claimed since it was read: a capture that races the expiry ends in one
-- of the two, never both.
UPDATE charges
SET authorization_expired_at = sqlc.arg(now)::timestamptz
WHERE id = @id AND authorization_expired_at IS NULL AND voided_at IS NULL AND NOT void_claimed
  AND NOT final_capture_claimed AND capture_reserved = amount_captured
RETURNING *;

-- name: GetCharge :one
-- The merchant's charge by id, for an answer that shows it as it is now.
SELECT id, amount, currency, order_id, provider_charge_id, created_at
FROM charges
WHERE id = @id AND merchant_id = @merchant_id;

-- name: ListProcessingCaptures :many
-- For operators: capture and void attempts still PROCESSING, oldest first,
-- with their charge.
SELECT a.*, m.name AS merchant_name, c.provider_charge_id
FROM charge_attempts a
JOIN merchants m ON m.id = a.merchant_id
JOIN charges c ON c.id = a.charge_id
WHERE a.kind IN ('capture', 'void') AND a.status = 'PROCESSING'
ORDER BY a.created_at
LIMIT sqlc.arg(max_attempts)::integer;

-- name: GetOpenAuthorization :one
-- The merchant's charge while its authorization is open with no capture or
-- void running, for a provider's word that it changed.
SELECT * FROM charges
WHERE id = @id AND merchant_id = @merchant_id AND capture_method = 'manual' AND voided_at IS NULL
  AND authorization_expired_at IS NULL AND NOT final_capture_claimed AND NOT void_claimed
  AND capture_reserved = amount_captured AND amount_captured < amount;
