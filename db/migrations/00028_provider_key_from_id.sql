-- +goose Up
-- An attempt's provider key is derived from its id: chargeonce_<id>, and
-- after the provider spent it, chargeonce_<id>_2, _3, … (as it has been
-- since the first migration). A rule of the row now says so, and with the
-- id unique, no two attempts can share a provider key: the unique index
-- that said it, which no query scans, cost every claim and every
-- finalizing update an index entry. The rule is a PL/pgSQL function, as
-- the table's other rules are (00025); adding the CHECK checks every
-- stored attempt.

-- +goose StatementBegin
CREATE FUNCTION charge_attempts_provider_key_rule(id uuid, provider_key text) RETURNS boolean
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

ALTER TABLE charge_attempts
    ADD CONSTRAINT charge_attempts_provider_key_check CHECK (charge_attempts_provider_key_rule(id, provider_key)),
    DROP CONSTRAINT charge_attempts_provider_key_key;

-- +goose Down
ALTER TABLE charge_attempts
    ADD CONSTRAINT charge_attempts_provider_key_key UNIQUE (provider_key),
    DROP CONSTRAINT charge_attempts_provider_key_check;
DROP FUNCTION charge_attempts_provider_key_rule(uuid, text);
