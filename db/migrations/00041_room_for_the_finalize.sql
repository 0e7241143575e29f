-- +goose Up
-- Room on each page for the update that follows a charge's insert. An
-- attempt's finalize is never HOT (indexes name status and completed_at),
-- but where its page has room it writes its new version there: one
-- update record of what changed, where a page without room made it write
-- a row lock and the whole row on another page (half of the finalizes of
-- fresh charges at concurrency 32, whose claims a batch writes onto one
-- page together). The relay's mark of an event (sent_at) is HOT only on
-- the event's page; elsewhere it writes the row again with an entry in
-- each of the event's indexes. The mark's new version is the row with
-- sent_at set, 8 B more, and the relay marks a batch in one statement, so
-- all the events on a page can be marked before a prune: 45 leaves them
-- room, 80 left about a third of them (payment's
-- TestChargeRows_FinalizeAndSentMark_StayOnTheirPages).
ALTER TABLE charge_attempts SET (fillfactor = 70);
ALTER TABLE charge_events SET (fillfactor = 45);

-- +goose Down
ALTER TABLE charge_attempts RESET (fillfactor);
ALTER TABLE charge_events SET (fillfactor = 80);
