-- +goose Up
-- merchant.card_testing_suspected: the declines of one of a merchant's
-- publishable keys ran over their allowance. It is the merchant's event:
-- it names no attempt and no session (and no idempotency key: '').
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired',
    'refund.succeeded', 'refund.failed', 'charge.late_refunded', 'charge.duplicate_refunded',
    'merchant.card_testing_suspected'));
ALTER TABLE charge_events DROP CONSTRAINT charge_events_subject_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_subject_check CHECK (CASE
    WHEN type LIKE 'merchant.%' THEN attempt_id IS NULL AND checkout_session_id IS NULL
    WHEN type LIKE 'checkout\_session.%' THEN attempt_id IS NULL AND checkout_session_id IS NOT NULL
    ELSE attempt_id IS NOT NULL
END);

-- +goose Down
DELETE FROM charge_events WHERE type = 'merchant.card_testing_suspected';
ALTER TABLE charge_events DROP CONSTRAINT charge_events_subject_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_subject_check
    CHECK ((attempt_id IS NULL) = (type LIKE 'checkout\_session.%') AND (attempt_id IS NOT NULL OR checkout_session_id IS NOT NULL));
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired',
    'refund.succeeded', 'refund.failed', 'charge.late_refunded', 'charge.duplicate_refunded'));
