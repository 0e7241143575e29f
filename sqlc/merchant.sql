-- name: UpsertMerchant :one
-- Creates a merchant by name, or returns the existing one, so that seeding the
-- development merchant and `apikey create` can run any number of times.
INSERT INTO merchants (id, name) VALUES (@id, @name)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING *;

-- name: InsertAPIKey :exec
-- Stores a key's hash. A key that is already stored is left as it is.
INSERT INTO api_keys (id, merchant_id, key_hash, key_prefix, development_only)
VALUES (@id, @merchant_id, @key_hash, @key_prefix, @development_only)
ON CONFLICT (key_hash) DO NOTHING;

-- name: GetMerchantByAPIKey :one
-- Authenticates a request: the merchant whose live key has this hash.
-- Development-only keys (the seeded demo key) count only where allowed.
SELECT m.*
FROM api_keys k
JOIN merchants m ON m.id = k.merchant_id
WHERE k.key_hash = @key_hash
  AND k.revoked_at IS NULL
  AND (NOT k.development_only OR @allow_development_only::boolean);

-- name: GetMerchant :one
-- Loads a merchant by id, for work that starts from a stored attempt.
SELECT * FROM merchants WHERE id = @id;
