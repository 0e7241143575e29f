-- +goose Up
-- An attempt names its charge without a foreign key. The key's check ran
-- in the statement that records a success (RecordChargeSucceeded): a
-- query of charges and a FOR KEY SHARE lock on the charge row that the
-- same statement had just inserted, one more WAL record a charge.
--
-- What it guaranteed stays:
-- - an attempt names a charge that exists: charge_id is written by
--   RecordChargeSucceeded alone, in the statement that inserts the charge
--   with that id (its CTE writes the charge only when the update found
--   the attempt, and the statement fails whole when the insert does);
-- - a charge that an attempt names is never deleted, nor its id changed:
--   the trigger below refuses it as the foreign key did, with SQLSTATE
--   23503 naming the constraint that used to. Nothing deletes charges.
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_charge_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION charges_keep_attempts() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'DELETE' OR NEW.id <> OLD.id)
       AND EXISTS (SELECT 1 FROM charge_attempts WHERE charge_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', TABLE = 'charge_attempts', CONSTRAINT = 'charge_attempts_charge_id_fkey',
            MESSAGE = format('charge %s is its attempt''s', OLD.id);
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER charges_keep_attempts BEFORE DELETE OR UPDATE OF id ON charges
FOR EACH ROW EXECUTE FUNCTION charges_keep_attempts();

-- +goose Down
DROP TRIGGER charges_keep_attempts ON charges;
DROP FUNCTION charges_keep_attempts();
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_charge_id_fkey FOREIGN KEY (charge_id) REFERENCES charges(id);
