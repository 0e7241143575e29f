-- +goose Up
-- The outbox's queue apart from its record. An event is written with its
-- id in charge_events_unsent, in the same statement, and the relay's
-- transaction deletes it there as it marks the event sent. The relay
-- reads the queue in id order (ids are time-ordered, UUIDv7); retention
-- reads charge_events by id up to its cutoff's. So no index of
-- charge_events names sent_at, and marking an event sent is a HOT update
-- (heap only, no index entry) where its page has room: fillfactor leaves
-- it some. Before this, that update wrote the event's row again with
-- three index entries (its primary key, the attempt's and the sent
-- index), the largest share of a charge's WAL after the claim's.
CREATE TABLE charge_events_unsent (
    event_id uuid PRIMARY KEY
);
INSERT INTO charge_events_unsent (event_id) SELECT id FROM charge_events WHERE sent_at IS NULL;
DROP INDEX charge_events_unsent_idx;
DROP INDEX charge_events_sent_idx;
ALTER TABLE charge_events SET (fillfactor = 80);

-- +goose Down
ALTER TABLE charge_events RESET (fillfactor);
CREATE INDEX charge_events_sent_idx ON charge_events (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX charge_events_unsent_idx ON charge_events (occurred_at) WHERE sent_at IS NULL;
DROP TABLE charge_events_unsent;
