-- +goose Up
-- Forgetting an attempt clears the duplicate_of of any charge that names it
-- (its foreign key's ON DELETE SET NULL), and with no index on
-- duplicate_of that check read every charge, once per attempt forgotten:
-- retention slowed as the charges grew. Few charges name a duplicate's
-- attempt, so the index holds only those (a charge without one adds
-- nothing to it).
CREATE INDEX charges_duplicate_of_idx ON charges (duplicate_of) WHERE duplicate_of IS NOT NULL;

-- +goose Down
DROP INDEX charges_duplicate_of_idx;
