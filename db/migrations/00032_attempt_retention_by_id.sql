-- +goose Up
-- Retention reads the attempts by their primary key, oldest first, up to
-- the ids of a retention ago (DeleteExpiredChargeAttempts): every attempt
-- whose result has expired was made before then, and ids are
-- time-ordered. The index on expires_at that it read before took an entry
-- at every outcome, whose update sets expires_at.
DROP INDEX charge_attempts_expires_idx;

-- +goose Down
CREATE INDEX charge_attempts_expires_idx ON charge_attempts (expires_at) WHERE status <> 'PROCESSING';
