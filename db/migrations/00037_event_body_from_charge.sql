-- +goose Up
-- A charge.succeeded's body held its charge again: the time it occurred,
-- the amount, currency and order, and the charge's id, provider id and
-- time, about 320 of its 417 bytes, the widest thing a fresh charge
-- writes. Its row now names its charge (charge_id, written by
-- RecordChargeSucceeded with the charge), and charge_event_body reads
-- them from the charge row, which keeps them unchanged and is never
-- forgotten: the body holds only the request's id. The published JSON is
-- the same jsonb as before, so the same bytes, its times spelled as Go's
-- encoding spells a UTC time (RFC 3339, trailing zeros of the fraction
-- dropped). Rows written before, and every other event, name no charge,
-- and the function gives their bodies as before.
ALTER TABLE charge_events ADD COLUMN charge_id uuid;

-- +goose StatementBegin
CREATE FUNCTION rfc3339(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
        || coalesce('.' || nullif(rtrim(to_char(t AT TIME ZONE 'UTC', 'US'), '0'), ''), '')
        || 'Z'
$$;
-- +goose StatementEnd

DROP FUNCTION charge_event_body(charge_events);

-- +goose StatementBegin
CREATE FUNCTION charge_event_body(e charge_events) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT e.body
        || jsonb_build_object('id', e.id, 'type', e.type, 'merchantId', e.merchant_id, 'idempotencyKey', e.idempotency_key)
        || CASE WHEN e.attempt_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('attemptId', e.attempt_id) END
        || CASE WHEN e.charge_id IS NULL THEN '{}'::jsonb ELSE (
            SELECT jsonb_build_object(
                       'occurredAt', rfc3339(e.occurred_at), 'amount', c.amount, 'currency', c.currency,
                       'charge', jsonb_build_object('id', c.id, 'providerChargeId', c.provider_charge_id,
                                                    'createdAt', rfc3339(c.created_at)),
                       'request', jsonb_set(e.body -> 'request', '{idempotency_key}', to_jsonb(e.idempotency_key)))
                   || CASE WHEN c.order_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('orderId', c.order_id) END
            FROM charges c WHERE c.id = e.charge_id
        ) END
$$;
-- +goose StatementEnd

-- +goose Down
UPDATE charge_events SET body = charge_event_body(charge_events) - 'id' - 'type' - 'merchantId' - 'idempotencyKey'
    - CASE WHEN attempt_id IS NULL THEN '' ELSE 'attemptId' END
WHERE charge_id IS NOT NULL;
DROP FUNCTION charge_event_body(charge_events);
-- +goose StatementBegin
CREATE FUNCTION charge_event_body(e charge_events) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT e.body
        || jsonb_build_object('id', e.id, 'type', e.type, 'merchantId', e.merchant_id, 'idempotencyKey', e.idempotency_key)
        || CASE WHEN e.attempt_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('attemptId', e.attempt_id) END
$$;
-- +goose StatementEnd
DROP FUNCTION rfc3339(timestamptz);
ALTER TABLE charge_events DROP COLUMN charge_id;
