-- +goose Up
-- The lease: while locked_until is in the future, the attempt's holder (the
-- request that claimed it, or the reconciler that took it over) is working on
-- it, and nobody else may. A PROCESSING attempt whose lease has expired is
-- abandoned, and the reconciler takes it over, bumping attempt.
ALTER TABLE charge_attempts ADD COLUMN locked_until timestamptz NOT NULL DEFAULT now();

-- The reconciler's and operators' way in: expired leases of open attempts.
DROP INDEX charge_attempts_processing_idx;
CREATE INDEX charge_attempts_lease_idx ON charge_attempts (locked_until) WHERE status = 'PROCESSING';

-- The retention cleanup's way in: finished attempts by expiry, never PROCESSING ones.
CREATE INDEX charge_attempts_expires_idx ON charge_attempts (expires_at) WHERE status <> 'PROCESSING';

-- One order, one payment: at most one attempt per order that is running or
-- succeeded. A declined attempt frees the order for another try.
CREATE UNIQUE INDEX charge_attempts_order_idx ON charge_attempts (merchant_id, order_id)
    WHERE order_id IS NOT NULL AND status <> 'FAILED';
-- Charges outlive their attempts, so the order stays paid after the key expired.
CREATE UNIQUE INDEX charges_order_idx ON charges (merchant_id, order_id) WHERE order_id IS NOT NULL;

-- +goose Down
DROP INDEX charges_order_idx;
DROP INDEX charge_attempts_order_idx;
DROP INDEX charge_attempts_expires_idx;
DROP INDEX charge_attempts_lease_idx;
CREATE INDEX charge_attempts_processing_idx ON charge_attempts (updated_at) WHERE status = 'PROCESSING';
ALTER TABLE charge_attempts DROP COLUMN locked_until;
