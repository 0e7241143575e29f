-- +goose Up
-- The lease index holds the attempts in flight, as it did; its predicate
-- names completed_at IS NULL, which holds for exactly the PROCESSING
-- attempts (charge_attempts_check2), instead of status = 'PROCESSING'.
-- Every fenced write (WHERE id = … AND status = 'PROCESSING') satisfied
-- the old predicate, so the planner could take the small partial index for
-- it and scan every attempt in flight, with the finalized ones that vacuum
-- had not cleared yet, filtering on the id: a finalize that cost more with
-- each checkout in flight. The new predicate is implied by no fenced write,
-- which now reads the one row by the primary key; the reconciler's scans
-- name it, and read the index as before.
DROP INDEX charge_attempts_lease_idx;
CREATE INDEX charge_attempts_lease_idx ON charge_attempts (locked_until) WHERE completed_at IS NULL;

-- +goose Down
DROP INDEX charge_attempts_lease_idx;
CREATE INDEX charge_attempts_lease_idx ON charge_attempts (locked_until) WHERE status = 'PROCESSING';
