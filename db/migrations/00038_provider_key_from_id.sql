-- +goose Up
-- An attempt's first provider key is chargeonce_<id>, which its id gives:
-- the row kept those 48 bytes twice for every fresh charge, in the claim's
-- insert and again in the finalizing update, which is not HOT and writes
-- the row anew. A row now keeps NULL for it, and a provider key only once
-- the provider spent the first (chargeonce_<id>_2, _3, …); payment reads
-- NULL as chargeonce_<id>, and so does charge_attempt_provider_key, for
-- the statements that read or compare an attempt's provider key. Rows
-- written before keep theirs, which says the same.
ALTER TABLE charge_attempts ALTER COLUMN provider_key DROP NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION charge_attempt_provider_key(a charge_attempts) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(a.provider_key, 'chargeonce_' || a.id)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION charge_attempts_provider_key_rule(id uuid, provider_key text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF provider_key IS NULL OR provider_key = 'chargeonce_' || id OR provider_key ~ ('^chargeonce_' || id || '_[0-9]+$') THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_provider_key_check',
        MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_provider_key_check"';
END
$$;
-- +goose StatementEnd

-- +goose Down
UPDATE charge_attempts SET provider_key = charge_attempt_provider_key(charge_attempts) WHERE provider_key IS NULL;
DROP FUNCTION charge_attempt_provider_key(charge_attempts);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION charge_attempts_provider_key_rule(id uuid, provider_key text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF provider_key = 'chargeonce_' || id OR provider_key ~ ('^chargeonce_' || id || '_[0-9]+$') THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'check_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_provider_key_check',
        MESSAGE = 'new row for relation "charge_attempts" violates check constraint "charge_attempts_provider_key_check"';
END
$$;
-- +goose StatementEnd
ALTER TABLE charge_attempts ALTER COLUMN provider_key SET NOT NULL;
