-- +goose Up
-- A charge's attempt, its charge row and its events name their merchant
-- without a foreign key. The foreign keys locked the merchant's row (FOR KEY
-- SHARE) in every statement that wrote one of them: one row that every
-- charge of a merchant locks, three times per charge, each lock a WAL
-- record, and with more than one charge at a time a new MultiXact holding
-- every locker. In pgbench, chargeonce's own SQL ran 1.14 times as fast at
-- 32 clients without them (docs/performance.md).
--
-- What they guaranteed stays:
-- - a row names a merchant that exists: every one is written for the
--   merchant of the API key or the checkout session that authenticated its
--   request (api_keys and checkout_sessions keep their foreign keys), or of
--   the attempt it follows from;
-- - a merchant with payments is never deleted: the trigger below refuses
--   it as the foreign keys did, with SQLSTATE 23503 naming the constraint
--   that used to.
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_merchant_id_fkey;
ALTER TABLE charges DROP CONSTRAINT charges_merchant_id_fkey;
ALTER TABLE charge_events DROP CONSTRAINT charge_events_merchant_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION merchants_keep_payments() RETURNS trigger
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

CREATE TRIGGER merchants_keep_payments BEFORE DELETE OR UPDATE OF id ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_keep_payments();

-- +goose Down
DROP TRIGGER merchants_keep_payments ON merchants;
DROP FUNCTION merchants_keep_payments();
ALTER TABLE charge_events ADD CONSTRAINT charge_events_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id);
ALTER TABLE charges ADD CONSTRAINT charges_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id);
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants(id);
