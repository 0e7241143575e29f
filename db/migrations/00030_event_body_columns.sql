-- +goose Up
-- An event's body holds what its row's columns do not: its id, type,
-- merchant, key and (where the row names it) attempt are the row's, and
-- charge_event_body puts them back into the body the relay publishes. The
-- published JSON is the same jsonb as before, so the same bytes: a jsonb
-- object keeps one order of its keys whatever order it was built in. It
-- narrows the event's row, a charge's largest, by a third. Rows written
-- before hold the whole body, which the function gives back unchanged.
-- +goose StatementBegin
CREATE FUNCTION charge_event_body(e charge_events) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT e.body
        || jsonb_build_object('id', e.id, 'type', e.type, 'merchantId', e.merchant_id, 'idempotencyKey', e.idempotency_key)
        || CASE WHEN e.attempt_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('attemptId', e.attempt_id) END
$$;
-- +goose StatementEnd

-- +goose Down
UPDATE charge_events SET body = charge_event_body(charge_events);
DROP FUNCTION charge_event_body(charge_events);
