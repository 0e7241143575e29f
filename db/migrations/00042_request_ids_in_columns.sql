-- +goose Up
-- A request's id is a UUID (36 characters) unless its caller sent an
-- X-Request-Id of its own, and every fresh charge wrote it twice as JSON
-- text: in its attempt's claim_source, with the instance that claimed it
-- ({"instance": ..., "request_id": ...}, 82 B), and in its charge.succeeded
-- event's body ({"request": {"id": ...}}, 71 B). A UUID column holds it in
-- 16 B. claim_request_id and claim_instance hold the claim's request and
-- instance; claim_source keeps what is left (a request id of the caller's
-- making, a trace), NULL when nothing is. charge_attempt_claim_source
-- gives the same JSON as before, from either form. request_id holds a
-- charge.succeeded's request id, its body keeping nothing then; the body
-- the relay publishes is the same.
ALTER TABLE charge_attempts ADD COLUMN claim_request_id uuid, ADD COLUMN claim_instance text;
ALTER TABLE charge_events ADD COLUMN request_id uuid;

-- +goose StatementBegin
CREATE FUNCTION charge_attempt_claim_source(a charge_attempts) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a.claim_request_id IS NULL AND a.claim_instance IS NULL THEN a.claim_source
                ELSE coalesce(a.claim_source, '{}'::jsonb)
                     || jsonb_strip_nulls(jsonb_build_object('request_id', a.claim_request_id, 'instance', a.claim_instance))
           END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION charge_event_body(e charge_events, c charges) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT e.body
        || jsonb_build_object('id', e.id, 'type', e.type, 'merchantId', e.merchant_id, 'idempotencyKey', e.idempotency_key)
        || CASE WHEN e.attempt_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('attemptId', e.attempt_id) END
        || CASE WHEN e.charge_id IS NULL THEN '{}'::jsonb ELSE
               jsonb_build_object(
                   'occurredAt', rfc3339(e.occurred_at), 'amount', c.amount, 'currency', c.currency,
                   'charge', jsonb_build_object('id', c.id, 'providerChargeId', c.provider_charge_id,
                                                'createdAt', rfc3339(c.created_at)),
                   'request', CASE WHEN e.request_id IS NULL
                                   THEN jsonb_set(e.body -> 'request', '{idempotency_key}', to_jsonb(e.idempotency_key))
                                   ELSE jsonb_build_object('id', e.request_id, 'idempotency_key', e.idempotency_key) END)
               || CASE WHEN c.order_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('orderId', c.order_id) END
           END
$$;
-- +goose StatementEnd

-- +goose Down
UPDATE charge_events SET body = jsonb_set(body, '{request}', jsonb_build_object('id', request_id))
WHERE request_id IS NOT NULL;
UPDATE charge_attempts SET claim_source = charge_attempt_claim_source(charge_attempts)
WHERE claim_request_id IS NOT NULL OR claim_instance IS NOT NULL;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION charge_event_body(e charge_events, c charges) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT e.body
        || jsonb_build_object('id', e.id, 'type', e.type, 'merchantId', e.merchant_id, 'idempotencyKey', e.idempotency_key)
        || CASE WHEN e.attempt_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('attemptId', e.attempt_id) END
        || CASE WHEN e.charge_id IS NULL THEN '{}'::jsonb ELSE
               jsonb_build_object(
                   'occurredAt', rfc3339(e.occurred_at), 'amount', c.amount, 'currency', c.currency,
                   'charge', jsonb_build_object('id', c.id, 'providerChargeId', c.provider_charge_id,
                                                'createdAt', rfc3339(c.created_at)),
                   'request', jsonb_set(e.body -> 'request', '{idempotency_key}', to_jsonb(e.idempotency_key)))
               || CASE WHEN c.order_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('orderId', c.order_id) END
           END
$$;
-- +goose StatementEnd
DROP FUNCTION charge_attempt_claim_source(charge_attempts);
ALTER TABLE charge_events DROP COLUMN request_id;
ALTER TABLE charge_attempts DROP COLUMN claim_request_id, DROP COLUMN claim_instance;
