-- +goose Up
-- A charge the provider holds twice for one attempt. One attempt should
-- make one provider charge; a lookup that finds a second successful one
-- (a provider's bug, or a stray send) records it as a charge of its own,
-- named by duplicate_of, and refunds it whole under one refund key per
-- duplicate, so that every instance and every pass refunds it once.
--   duplicate_of:  the attempt the provider charged twice for.
--   refund_due_at: the next try at claiming its refund; NULL once claimed.
ALTER TABLE charges ADD COLUMN duplicate_of uuid REFERENCES charge_attempts (id) ON DELETE SET NULL;
ALTER TABLE charges ADD COLUMN refund_due_at timestamptz;
ALTER TABLE charges ADD CONSTRAINT charges_refund_due_check CHECK (refund_due_at IS NULL OR duplicate_of IS NOT NULL);
-- The reconciler's way in: the duplicates whose refund is still to claim.
CREATE INDEX charges_refund_due_idx ON charges (refund_due_at) WHERE refund_due_at IS NOT NULL;

-- charge.duplicate_refunded: once per duplicate, written in the
-- transaction that records it.
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired',
    'refund.succeeded', 'refund.failed', 'charge.late_refunded', 'charge.duplicate_refunded'));

-- +goose Down
DELETE FROM charge_events WHERE type = 'charge.duplicate_refunded';
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired',
    'refund.succeeded', 'refund.failed', 'charge.late_refunded'));
DROP INDEX charges_refund_due_idx;
ALTER TABLE charges DROP CONSTRAINT charges_refund_due_check;
ALTER TABLE charges DROP COLUMN refund_due_at;
ALTER TABLE charges DROP COLUMN duplicate_of;
