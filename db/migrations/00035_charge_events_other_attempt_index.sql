-- +goose Up
-- The history of a key reads its attempts' events by attempt
-- (ListHistoryEvents), and read the whole outbox for them: no index
-- served a read by attempt_id of any type. The unique indexes of an
-- attempt's outcome, its 3-D Secure action and its refunds name
-- attempt_id, each for its own types; this one names it for the other
-- types an attempt's event can have (an authorization, a capture, a void,
-- a duplicate's refund), so that the read, one part per index with the
-- index's predicate, finds every event of an attempt by index. A plain
-- charge's events have no entry in it.
CREATE INDEX charge_events_attempt_other_idx ON charge_events (attempt_id)
    WHERE attempt_id IS NOT NULL
      AND type NOT IN ('charge.succeeded', 'charge.failed', 'charge.requires_action',
                       'refund.succeeded', 'refund.failed', 'charge.late_refunded');

-- +goose Down
DROP INDEX charge_events_attempt_other_idx;
