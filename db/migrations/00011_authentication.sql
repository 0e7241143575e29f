-- +goose Up
-- Customer authentication (3-D Secure). A charge that carries a return_url
-- may wait for the shopper: the provider answers with a challenge page to
-- send them to, and the attempt stays PROCESSING with that next action
-- until the provider, when read again, says how it ended. Nothing is ever
-- sent again while it waits; after the authentication window the payment
-- is cancelled at the provider.
--   return_url:        where the provider sends the shopper back (part of
--                      the request's fingerprint).
--   next_action_url:   the provider's challenge page, once it asked for one.
--   action_since:      when the attempt began waiting; the window counts
--                      from here, not from the claim.
--   action_checked_at: when the provider was last read for it; a retry or
--                      a poll reads it again at most once a second.
ALTER TABLE charge_attempts ADD COLUMN return_url text;
ALTER TABLE charge_attempts ADD COLUMN next_action_url text;
ALTER TABLE charge_attempts ADD COLUMN action_since timestamptz;
ALTER TABLE charge_attempts ADD COLUMN action_checked_at timestamptz;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_action_check
    CHECK ((next_action_url IS NULL) = (action_since IS NULL)
           AND (action_since IS NULL) = (action_checked_at IS NULL)
           AND (next_action_url IS NULL OR return_url IS NOT NULL));

-- charge.requires_action announces that an attempt waits for the shopper:
-- once per attempt, before its final event. The one-event-per-attempt
-- index becomes one final event per attempt, and one requires_action.
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'charge.requires_action', 'checkout_session.paid', 'checkout_session.expired'));
DROP INDEX charge_events_attempt_idx;
CREATE UNIQUE INDEX charge_events_attempt_idx ON charge_events (attempt_id) WHERE type <> 'charge.requires_action';
CREATE UNIQUE INDEX charge_events_action_idx ON charge_events (attempt_id) WHERE type = 'charge.requires_action';

-- +goose Down
DROP INDEX charge_events_action_idx;
DROP INDEX charge_events_attempt_idx;
DELETE FROM charge_events WHERE type = 'charge.requires_action';
CREATE UNIQUE INDEX charge_events_attempt_idx ON charge_events (attempt_id);
ALTER TABLE charge_events DROP CONSTRAINT charge_events_type_check;
ALTER TABLE charge_events ADD CONSTRAINT charge_events_type_check CHECK (type IN (
    'charge.succeeded', 'charge.failed', 'checkout_session.paid', 'checkout_session.expired'));
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_action_check;
ALTER TABLE charge_attempts DROP COLUMN action_checked_at;
ALTER TABLE charge_attempts DROP COLUMN action_since;
ALTER TABLE charge_attempts DROP COLUMN next_action_url;
ALTER TABLE charge_attempts DROP COLUMN return_url;
