-- +goose Up
-- Room on each page of the outbox for the relay's mark of an event
-- (sent_at), which is HOT only on the event's page; elsewhere it writes
-- a row lock, the whole row on another page and an entry in each of the
-- event's indexes. The mark's new version is the row with sent_at set,
-- 8 B more, and the relay marks a batch in one statement, so all the
-- events on a page can be marked before a prune: 45 leaves them room, 80
-- left about two thirds of them to move (payment's
-- TestChargeRows_SentMark_StaysOnTheEventsPage). At concurrency 32 a
-- batch of recordings writes its events onto one page together, and the
-- relay's batch of 36 found room for about 6 of a page's marks.
-- (The attempts' pages at 70, for their finalize, measured as well: the
-- finalize's row locks went, but fresh charges over 10,000,000 stored
-- keys ran slower, and the attempts stay at 100.)
ALTER TABLE charge_events SET (fillfactor = 45);

-- +goose Down
ALTER TABLE charge_events SET (fillfactor = 80);
