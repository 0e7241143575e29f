-- +goose Up
-- merchants_keep_payments (00027) fires before an update that names the
-- id as well as before a delete, and returned OLD for both: an update then
-- wrote the row as it was, so that one naming the id changed nothing,
-- silently. It refuses only a delete, or an id that changes, of a
-- merchant with payments, and lets an update write its new row.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_keep_payments() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM charge_attempts WHERE merchant_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_merchant_id_fkey',
            MESSAGE = format('merchant %s has charge attempts', OLD.id);
    END IF;
    IF EXISTS (SELECT 1 FROM charges WHERE merchant_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', TABLE = 'charges', CONSTRAINT = 'charges_merchant_id_fkey',
            MESSAGE = format('merchant %s has charges', OLD.id);
    END IF;
    IF EXISTS (SELECT 1 FROM charge_events WHERE merchant_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', TABLE = 'charge_events', CONSTRAINT = 'charge_events_merchant_id_fkey',
            MESSAGE = format('merchant %s has events', OLD.id);
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_keep_payments() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM charge_attempts WHERE merchant_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_merchant_id_fkey',
            MESSAGE = format('merchant %s has charge attempts', OLD.id);
    END IF;
    IF EXISTS (SELECT 1 FROM charges WHERE merchant_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', TABLE = 'charges', CONSTRAINT = 'charges_merchant_id_fkey',
            MESSAGE = format('merchant %s has charges', OLD.id);
    END IF;
    IF EXISTS (SELECT 1 FROM charge_events WHERE merchant_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', TABLE = 'charge_events', CONSTRAINT = 'charge_events_merchant_id_fkey',
            MESSAGE = format('merchant %s has events', OLD.id);
    END IF;
    RETURN OLD;
END
$$;
-- +goose StatementEnd
