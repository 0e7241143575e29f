-- name: UpsertMerchant :one
-- Creates a merchant by name, or returns the existing one, so that seeding the
-- development merchant and `apikey create` can run any number of times.
INSERT INTO merchants (id, name) VALUES (@id, @name)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING *;

-- name: InsertAPIKey :exec
-- Stores a key's hash and prefix. Storing a key that is already stored (the
-- development key, at every development start) only corrects its prefix, which
-- older versions stored whole for short keys; its merchant and revocation stay
-- as they are, so a revoked development key stays revoked.
INSERT INTO api_keys (id, merchant_id, key_hash, key_prefix, development_only, kind)
VALUES (@id, @merchant_id, @key_hash, @key_prefix, @development_only, @kind)
ON CONFLICT (key_hash) DO UPDATE SET key_prefix = EXCLUDED.key_prefix;

-- name: ListAPIKeyCandidates :many
-- Authenticates a request: the live keys under the presented key's prefix,
-- whose hashes the caller compares in constant time. Development-only keys
-- (the seeded demo key) count only where allowed.
SELECT k.key_hash, k.id, k.kind, m.id AS merchant_id, m.name AS merchant_name
FROM api_keys k
JOIN merchants m ON m.id = k.merchant_id
WHERE k.key_prefix = @key_prefix
  AND k.revoked_at IS NULL
  AND (NOT k.development_only OR @allow_development_only::boolean);

-- name: GetMerchant :one
-- Loads a merchant by id, for work that starts from a stored attempt.
SELECT * FROM merchants WHERE id = @id;

-- name: GetMerchantByName :one
-- Finds the merchant an operator names, for `apikey rotate`, which must not
-- create a merchant by a typo.
SELECT * FROM merchants WHERE name = @name;

-- name: ListAPIKeys :many
-- Every key of every merchant, for `apikey list`. Never the hash.
SELECT k.id, m.name AS merchant_name, k.key_prefix, k.kind, k.development_only, k.created_at, k.revoked_at
FROM api_keys k
JOIN merchants m ON m.id = k.merchant_id
ORDER BY m.name, k.created_at, k.id;

-- name: ListLiveAPIKeysOfMerchant :many
-- A merchant's keys that still authenticate, for `apikey rotate` to show what
-- remains valid until the operator revokes it.
SELECT k.id, m.name AS merchant_name, k.key_prefix, k.kind, k.development_only, k.created_at, k.revoked_at
FROM api_keys k
JOIN merchants m ON m.id = k.merchant_id
WHERE k.merchant_id = @merchant_id AND k.revoked_at IS NULL
ORDER BY k.created_at, k.id;

-- name: ListLiveAPIKeysByPrefix :many
-- The live keys an operator means by a prefix, for `apikey revoke PREFIX`,
-- which revokes only when exactly one matches.
SELECT k.id, m.name AS merchant_name, k.key_prefix, k.kind, k.development_only, k.created_at, k.revoked_at
FROM api_keys k
JOIN merchants m ON m.id = k.merchant_id
WHERE k.key_prefix = @key_prefix AND k.revoked_at IS NULL
ORDER BY k.created_at, k.id;

-- name: GetAPIKey :one
-- Loads a key by id, to tell an unknown id from an already revoked key.
SELECT k.id, m.name AS merchant_name, k.key_prefix, k.kind, k.development_only, k.created_at, k.revoked_at
FROM api_keys k
JOIN merchants m ON m.id = k.merchant_id
WHERE k.id = @id;

-- name: RevokeAPIKey :one
-- Revokes a live key. Its commit notifies every server's cache of
-- authentications (migration 00009), so the key stops working at once. No
-- row: the key is unknown or already revoked.
UPDATE api_keys k
SET revoked_at = now()
FROM merchants m
WHERE m.id = k.merchant_id AND k.id = @id AND k.revoked_at IS NULL
RETURNING k.id, m.name AS merchant_name, k.key_prefix, k.kind, k.development_only, k.created_at, k.revoked_at;

-- name: AddMerchantOrigin :execrows
-- Registers an origin of a merchant's checkout pages; 0 rows: it was
-- registered already.
INSERT INTO merchant_origins (merchant_id, origin) VALUES (@merchant_id, @origin)
ON CONFLICT DO NOTHING;

-- name: RemoveMerchantOrigin :execrows
-- Removes an origin; 0 rows: it was not registered.
DELETE FROM merchant_origins WHERE merchant_id = @merchant_id AND origin = @origin;

-- name: ListMerchantOrigins :many
-- The registered origins, of one merchant or (no name) of every merchant.
SELECT m.name AS merchant_name, o.origin, o.created_at
FROM merchant_origins o
JOIN merchants m ON m.id = o.merchant_id
WHERE sqlc.narg(merchant_name)::text IS NULL OR m.name = sqlc.narg(merchant_name)::text
ORDER BY m.name, o.origin;

-- name: MerchantOriginExists :one
-- Whether a merchant registered an origin, for a publishable key's
-- cross-origin request.
SELECT EXISTS (SELECT 1 FROM merchant_origins WHERE merchant_id = @merchant_id AND origin = @origin);

-- name: AnyMerchantOriginExists :one
-- Whether any merchant registered an origin, for a preflight, which names
-- no key.
SELECT EXISTS (SELECT 1 FROM merchant_origins WHERE origin = @origin);
