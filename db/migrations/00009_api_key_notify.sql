-- +goose Up
-- Servers cache successful authentications (payment.Merchants) only while
-- they LISTEN on chargeonce_api_keys, and empty the cache at each of these
-- notifications. So any change to a key (created, revoked, deleted, by the
-- CLI, another instance or SQL by hand) reaches every server at its commit
-- (NOTIFY is delivered at commit, and not at all on rollback). The payload is
-- empty: servers drop the whole cache, as keys change rarely.
-- +goose StatementBegin
CREATE FUNCTION api_keys_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('chargeonce_api_keys', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER api_keys_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION api_keys_notify();
-- A cached authentication holds the merchant's name too; a deleted merchant's
-- keys go by cascade, which fires the trigger above as well.
CREATE TRIGGER merchants_notify AFTER UPDATE OR DELETE OR TRUNCATE ON merchants
    FOR EACH STATEMENT EXECUTE FUNCTION api_keys_notify();

-- +goose Down
DROP TRIGGER merchants_notify ON merchants;
DROP TRIGGER api_keys_notify ON api_keys;
DROP FUNCTION api_keys_notify();
