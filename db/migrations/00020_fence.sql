-- +goose Up
-- "Attempt" means one thing on both sides of the wire: the claimed key.
-- The counter of an attempt's holders (1 for the request that claimed it,
-- one more for each takeover), on which every finalizing write is fenced,
-- is its fence.
ALTER TABLE charge_attempts RENAME COLUMN attempt TO fence;

-- +goose Down
ALTER TABLE charge_attempts RENAME COLUMN fence TO attempt;
