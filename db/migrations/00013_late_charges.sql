-- +goose Up
-- No late charge left behind. An attempt failed as provider_unavailable
-- (the provider never answered within the redrive window) may still have
-- a send in flight that completes at the provider later: the shopper
-- would be charged and told the card was not. Such an attempt stays
-- watched, by reading the provider (never by sending), until
-- late_watch_until; a charge found for it is recorded (late_charge_id)
-- and refunded under one refund key per attempt, and the attempt stays
-- FAILED.
--   late_check_at:    the watch's next read; NULL once the watch is over.
--   late_watch_until: when the watch ends.
--   late_charge_id:   the late charge found, and refunded.
ALTER TABLE charge_attempts ADD COLUMN late_check_at timestamptz;
ALTER TABLE charge_attempts ADD COLUMN late_watch_until timestamptz;
ALTER TABLE charge_attempts ADD COLUMN late_charge_id uuid REFERENCES charges (id);
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_late_check
    CHECK ((late_check_at IS NULL OR late_watch_until IS NOT NULL)
           AND (late_watch_until IS NULL OR (status = 'FAILED' AND kind = 'charge')));
-- The watch's way in: the next reads due.
CREATE INDEX charge_attempts_late_idx ON charge_attempts (late_check_at) WHERE late_check_at IS NOT NULL;

-- charge.late_refunded: once per attempt.
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired',
    'refund.succeeded', 'refund.failed', 'charge.late_refunded'));
DROP INDEX charge_events_refund_idx;
CREATE UNIQUE INDEX charge_events_refund_idx ON charge_events (attempt_id, type)
    WHERE type IN ('refund.succeeded', 'refund.failed', 'charge.late_refunded');

-- +goose Down
DROP INDEX charge_events_refund_idx;
DELETE FROM charge_events WHERE type = 'charge.late_refunded';
CREATE UNIQUE INDEX charge_events_refund_idx ON charge_events (attempt_id, type)
    WHERE type IN ('refund.succeeded', 'refund.failed');
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired',
    'refund.succeeded', 'refund.failed'));
DROP INDEX charge_attempts_late_idx;
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_late_check;
ALTER TABLE charge_attempts DROP COLUMN late_charge_id;
ALTER TABLE charge_attempts DROP COLUMN late_watch_until;
ALTER TABLE charge_attempts DROP COLUMN late_check_at;
