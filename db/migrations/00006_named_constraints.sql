-- +goose Up
-- The store tells a repeated provider charge from other conflicts by this
-- constraint's name, so the name is ours rather than PostgreSQL's default.
ALTER TABLE charges RENAME CONSTRAINT charges_provider_charge_id_key TO charges_provider_charge_id_unique;

-- updated_at was written by every change of an attempt and read by nothing:
-- locked_until, completed_at and the attempt number say what it would.
ALTER TABLE charge_attempts DROP COLUMN updated_at;

-- +goose Down
ALTER TABLE charge_attempts ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE charges RENAME CONSTRAINT charges_provider_charge_id_unique TO charges_provider_charge_id_key;
