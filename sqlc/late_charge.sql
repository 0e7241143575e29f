-- name: WatchLateCharge :exec
-- Starts the watch of an attempt just failed as provider_unavailable, in
-- the transaction that fails it: its first read at first_check, the last
-- at watch_until, and its result kept at least as long.
UPDATE charge_attempts
SET late_check_at = sqlc.arg(first_check)::timestamptz,
    late_watch_until = sqlc.arg(watch_until)::timestamptz,
    expires_at = greatest(expires_at, sqlc.arg(watch_until)::timestamptz)
WHERE id = @id AND status = 'FAILED' AND kind = 'charge';

-- name: TakeLateChecks :many
-- The watch's batch: attempts whose next read is due, each given its next
-- one first, on a widening schedule after the failure (1 h, 6 h, then the
-- watch's end; NULL after it), so that several instances never read the
-- same one at once (SKIP LOCKED) and a reader that dies is followed by
-- the next step's. One whose late charge is recorded but not yet refunded
-- comes back within a minute.
UPDATE charge_attempts
SET late_check_at = CASE
        WHEN late_charge_id IS NOT NULL THEN sqlc.arg(now)::timestamptz + interval '1 minute'
        ELSE (SELECT min(t) FROM unnest(ARRAY[completed_at + interval '1 hour', completed_at + interval '6 hours', late_watch_until]) AS t
              WHERE t > sqlc.arg(now)::timestamptz AND t <= late_watch_until)
    END
WHERE id IN (
    SELECT id FROM charge_attempts
    WHERE charge_attempts.late_check_at <= sqlc.arg(now)::timestamptz
    ORDER BY charge_attempts.late_check_at
    LIMIT sqlc.arg(max_attempts)::integer
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: GetChargeByProviderID :one
-- A recorded charge by the provider's id.
SELECT * FROM charges WHERE provider_charge_id = @provider_charge_id;

-- name: RecordLateCharge :one
-- Names the late charge of a failed attempt, once.
UPDATE charge_attempts
SET late_charge_id = @late_charge_id
WHERE id = @id AND status = 'FAILED' AND late_charge_id IS NULL
RETURNING *;

-- name: EndLateWatch :exec
-- Ends the watch of an attempt whose late charge's refund is claimed.
UPDATE charge_attempts SET late_check_at = NULL WHERE id = @id;
