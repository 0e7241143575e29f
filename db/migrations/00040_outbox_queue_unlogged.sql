-- +goose Up
-- The relay's queue (charge_events_unsent) is unlogged: putting an event's
-- id on it, and taking it off once the event is sent, writes no WAL (a heap
-- insert, its index entry and a delete: about 190 B of a fresh charge's
-- 2.4 KB). The outbox stays transactional: the event is a logged row of
-- charge_events, written in the transaction of the change it announces,
-- and its sent_at says whether the broker has it. The queue is only where
-- the relay finds the unsent ones without reading charge_events.
--
-- PostgreSQL empties an unlogged table at crash recovery, and a promoted
-- standby starts with it empty. So the queue has a companion, also
-- unlogged, that holds one row while the queue is whole:
-- charge_events_unsent_intact. Emptied with the queue, its row is missing
-- after either; the relay then queues again every event whose sent_at is
-- NULL (RestoreChargeEventsQueue, in its turn, before its batch) and puts
-- the row back.
ALTER TABLE charge_events_unsent SET UNLOGGED;
CREATE UNLOGGED TABLE charge_events_unsent_intact (
    intact boolean PRIMARY KEY DEFAULT true CHECK (intact)
);
INSERT INTO charge_events_unsent_intact DEFAULT VALUES;

-- +goose Down
DROP TABLE charge_events_unsent_intact;
ALTER TABLE charge_events_unsent SET LOGGED;
