-- +goose Up
-- An idempotency key is unique in its scope: the merchant's own keys (what
-- its server sends with a secret key: key_session_id NULL), or the keys of
-- one checkout session (what a browser sends on the session with a
-- publishable key: key_session_id names the session). A page can then
-- neither take a key the merchant's server will use (a refund's, say), nor
-- learn which keys the merchant used: a paid session answers every new key
-- of its own scope alike.
ALTER TABLE charge_attempts ADD COLUMN key_session_id uuid;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_key_session_check
    CHECK (key_session_id IS NULL OR key_session_id = checkout_session_id);
-- NULLS NOT DISTINCT: the merchant's scope (NULL) is one scope, and the
-- claim's ON CONFLICT (merchant_id, idempotency_key, key_session_id) infers
-- this index. Built before the old one goes, so that no moment is without
-- a unique key.
CREATE UNIQUE INDEX charge_attempts_scoped_key_idx
    ON charge_attempts (merchant_id, idempotency_key, key_session_id) NULLS NOT DISTINCT;
DROP INDEX charge_attempts_merchant_key_idx;
ALTER INDEX charge_attempts_scoped_key_idx RENAME TO charge_attempts_merchant_key_idx;

-- +goose Down
DELETE FROM charge_attempts WHERE key_session_id IS NOT NULL;
CREATE UNIQUE INDEX charge_attempts_unscoped_key_idx ON charge_attempts (merchant_id, idempotency_key);
DROP INDEX charge_attempts_merchant_key_idx;
ALTER INDEX charge_attempts_unscoped_key_idx RENAME TO charge_attempts_merchant_key_idx;
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_key_session_check;
ALTER TABLE charge_attempts DROP COLUMN key_session_id;
