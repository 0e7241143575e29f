-- name: InsertCheckoutSession :one
-- Creates a session, unless the merchant used the key already (no row: read
-- the stored session and answer from it). An order with a recorded charge
-- inserts nothing either; a second open session for an order is a unique
-- violation (checkout_sessions_open_order_idx).
INSERT INTO checkout_sessions (
    id, merchant_id, idempotency_key, fingerprint, client_secret_hash,
    amount, currency, order_id, description, return_url, created_at, expires_at, capture_method
)
SELECT @id, @merchant_id, @idempotency_key, @fingerprint, @client_secret_hash,
       @amount, @currency, sqlc.narg(order_id), sqlc.narg(description), sqlc.narg(return_url),
       sqlc.arg(created_at)::timestamptz, sqlc.arg(expires_at)::timestamptz, sqlc.narg(capture_method)::text
WHERE NOT EXISTS (
    SELECT 1 FROM charges c
    WHERE c.merchant_id = @merchant_id AND c.order_id = sqlc.narg(order_id)
)
ON CONFLICT (merchant_id, idempotency_key) DO NOTHING
RETURNING *;

-- name: GetCheckoutSessionByKey :one
-- The session a merchant created with an idempotency key, for the replay.
SELECT * FROM checkout_sessions WHERE merchant_id = @merchant_id AND idempotency_key = @idempotency_key;

-- name: GetCheckoutSession :one
-- A merchant's session by id: nobody reads another merchant's session.
SELECT * FROM checkout_sessions WHERE merchant_id = @merchant_id AND id = @id;

-- name: GetCheckoutSessionCharge :one
-- The charge that paid a session.
SELECT * FROM charges WHERE id = @id;

-- name: PayCheckoutSession :one
-- Marks a session paid by charge_id, in the transaction that records the
-- charge. An attempt that was running when the session expired may still
-- pay it: money moved, so PAID is the truth.
UPDATE checkout_sessions
SET status = 'PAID', charge_id = @charge_id, closed_at = sqlc.arg(now)::timestamptz
WHERE id = @id AND status <> 'PAID'
RETURNING *;

-- name: ExpireCheckoutSessions :many
-- The expiry sweep: open sessions past their expiry with no attempt running
-- become EXPIRED (an attempt running at expiry finishes first, and its
-- success pays the session). Optionally only one merchant's order, when a
-- new session for that order is being created. SKIP LOCKED lets several
-- sweeps run at once.
UPDATE checkout_sessions
SET status = 'EXPIRED', closed_at = sqlc.arg(now)::timestamptz
WHERE id IN (
    SELECT s.id FROM checkout_sessions s
    WHERE s.status = 'OPEN' AND s.expires_at <= sqlc.arg(now)::timestamptz
      AND (sqlc.narg(order_id)::text IS NULL
           OR (s.merchant_id = sqlc.narg(merchant_id)::uuid AND s.order_id = sqlc.narg(order_id)::text))
      AND NOT EXISTS (
          SELECT 1 FROM charge_attempts a
          WHERE a.checkout_session_id = s.id AND a.status = 'PROCESSING'
      )
    ORDER BY s.expires_at
    LIMIT sqlc.arg(max_sessions)::integer
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: SessionHasLiveAttempt :one
-- Whether a session has an attempt running or succeeded: a new key on it is
-- then refused as paid, or being paid.
SELECT EXISTS (
    SELECT 1 FROM charge_attempts
    WHERE checkout_session_id = @checkout_session_id AND status <> 'FAILED'
);
