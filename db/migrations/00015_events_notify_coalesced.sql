-- +goose Up
-- No NOTIFY in the transactions that write events. PostgreSQL takes one
-- lock on its notification queue at the commit of every notifying
-- transaction and holds it through the commit's flush, so the per-event
-- trigger serialized every commit of an event, on every instance. The
-- instance that commits an event now wakes its own relay and live status
-- in process, and tells the others with one NOTIFY on chargeonce_events
-- for many commits, sent after them (events.Notifier); a notice lost with a
-- dying instance costs no event: the relays poll, and watchers read again.
DROP TRIGGER charge_events_notify ON charge_events;
DROP FUNCTION charge_events_notify();

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION charge_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('chargeonce_events', json_build_object(
        'id', NEW.id, 'merchantId', NEW.merchant_id, 'idempotencyKey', NEW.idempotency_key)::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER charge_events_notify AFTER INSERT ON charge_events
    FOR EACH ROW EXECUTE FUNCTION charge_events_notify();
