-- name: InsertDuplicateCharge :one
-- Records a second successful provider charge of one attempt, once,
-- whoever finds it (the unique provider_charge_id), its refund due now.
INSERT INTO charges (id, merchant_id, amount, currency, order_id, description, provider_charge_id, duplicate_of, refund_due_at)
VALUES (@id, @merchant_id, @amount, @currency, @order_id, @description, @provider_charge_id, @duplicate_of, @refund_due_at)
ON CONFLICT (provider_charge_id) DO NOTHING
RETURNING *;

-- name: TakeDueDuplicateRefunds :many
-- The duplicates whose refund is still to claim, each put off a minute
-- first, so that several instances never claim one at once (SKIP LOCKED)
-- and one that dies is followed by the next pass.
UPDATE charges
SET refund_due_at = sqlc.arg(now)::timestamptz + interval '1 minute'
WHERE id IN (
    SELECT id FROM charges
    WHERE charges.refund_due_at <= sqlc.arg(now)::timestamptz
    ORDER BY charges.refund_due_at
    LIMIT sqlc.arg(max_charges)::integer
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: EndDuplicateRefundDue :exec
-- The duplicate's refund is claimed: the reconciler finishes it.
UPDATE charges SET refund_due_at = NULL WHERE id = @id;
