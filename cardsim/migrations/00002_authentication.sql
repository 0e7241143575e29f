-- +goose Up
-- 3-D Secure: a charge of a card that needs authentication, made with a
-- return_url, waits for the shopper (requires_action) until they pass or fail
-- the challenge (succeeded, failed) or the caller gives up on them
-- (canceled). The constraint keeps its name, so that every database, however
-- it got 00001, has the same one.
ALTER TABLE cardsim.charges DROP CONSTRAINT charges_status_check;
ALTER TABLE cardsim.charges ADD CONSTRAINT charges_status_check
    CHECK (status IN ('succeeded', 'failed', 'requires_action', 'canceled'));
-- Where the challenge page sends the shopper back; NULL when the request had none.
ALTER TABLE cardsim.charges ADD COLUMN return_url text;
-- Why the caller cancelled a waiting charge (Stripe's reasons); NULL otherwise.
ALTER TABLE cardsim.charges ADD COLUMN cancellation_reason text;
-- Only a charge with somewhere to send the shopper back can wait for them.
ALTER TABLE cardsim.charges ADD CONSTRAINT charges_return_url_check
    CHECK (status <> 'requires_action' OR return_url IS NOT NULL);

-- +goose Down
-- Waiting and cancelled charges do not fit the old constraint: they go too.
DELETE FROM cardsim.charges WHERE status IN ('requires_action', 'canceled');
ALTER TABLE cardsim.charges DROP CONSTRAINT charges_return_url_check;
ALTER TABLE cardsim.charges DROP COLUMN cancellation_reason;
ALTER TABLE cardsim.charges DROP COLUMN return_url;
ALTER TABLE cardsim.charges DROP CONSTRAINT charges_status_check;
ALTER TABLE cardsim.charges ADD CONSTRAINT charges_status_check CHECK (status IN ('succeeded', 'failed'));
