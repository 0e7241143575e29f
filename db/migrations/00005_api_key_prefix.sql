-- +goose Up
-- key_prefix is a key's public identifier: its first min(10, length/2)
-- characters (payment.keyPrefix), never the whole key. Authentication finds
-- the candidate live keys by it and compares their hashes in constant time,
-- and operators revoke keys by it. Not unique: two keys may share a prefix.
CREATE INDEX api_keys_prefix_idx ON api_keys (key_prefix) WHERE revoked_at IS NULL;

-- Until now a development key of at most 10 characters (the demo key
-- `demo-key`) had its whole self in key_prefix. Such a prefix is the whole
-- key, so its first half is the new prefix. Generated keys (co_sk_..., 49
-- characters) keep theirs. A longer development key's length is unknown here;
-- the server corrects the configured demo key's prefix at every development
-- start (EnsureDevelopmentKey).
UPDATE api_keys SET key_prefix = left(key_prefix, length(key_prefix) / 2)
WHERE development_only AND length(key_prefix) <= 10;

-- +goose Down
-- The cut prefixes stay cut: the whole keys are gone, as they should be.
DROP INDEX api_keys_prefix_idx;
